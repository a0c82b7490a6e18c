"""``[tool.devlint]`` in pyproject.toml: selection, per-file-ignores, excludes, precedence of
the command line, ``--force-exclude``; and the flake8 plugin's warning about a bare ``D``."""

from __future__ import annotations

from pathlib import Path

import pytest

from devlint.config import Config, ConfigError, find, load, path_matches

from conftest import devlint as run_devlint, flake8, parse_findings

SOURCE = """import torch
a = torch.ones(1).cuda()
b = torch.ones(1, device="cuda")
c = torch.load("x.pt")
"""
ALL = {(2, "DEV102"), (3, "DEV101"), (4, "DEV104")}


def pyproject(body: str) -> str:
    return "[project]\nname = 'demo'\n\n[tool.devlint]\n" + body


def found(root: Path, *args: str, cwd: Path | None = None) -> dict[str, set[tuple[int, str]]]:
    result = run_devlint("check", *args, cwd=cwd or root)
    assert result.returncode in (0, 1), result.stderr
    return parse_findings(result.stdout)


def test_select_and_ignore_from_pyproject(tmp_tree):
    root = tmp_tree({"pyproject.toml": pyproject('select = ["DEV1"]\nignore = ["DEV101"]\n'), "a.py": SOURCE})
    assert found(root, ".") == {"a.py": {(2, "DEV102"), (4, "DEV104")}}


def test_extend_select(tmp_tree):
    root = tmp_tree({"pyproject.toml": pyproject('select = ["DEV104"]\nextend-select = ["DEV102"]\n'), "a.py": SOURCE})
    assert found(root, ".") == {"a.py": {(2, "DEV102"), (4, "DEV104")}}


def test_command_line_wins(tmp_tree):
    root = tmp_tree({"pyproject.toml": pyproject('select = ["DEV104"]\nignore = ["DEV102"]\n'), "a.py": SOURCE})
    assert found(root, ".") == {"a.py": {(4, "DEV104")}}
    # --select starts afresh: the file's select and ignore no longer apply
    assert found(root, "--select", "DEV102", ".") == {"a.py": {(2, "DEV102")}}
    # --extend-select re-enables a code the file ignores
    assert found(root, "--extend-select", "DEV102", ".") == {"a.py": {(2, "DEV102"), (4, "DEV104")}}
    # --ignore adds to the file's ignores
    (root / "pyproject.toml").write_text(pyproject('select = ["DEV10"]\nignore = ["DEV102"]\n'))
    assert found(root, "--ignore", "DEV104", ".") == {"a.py": {(3, "DEV101")}}
    # --isolated ignores the file
    assert found(root, "--isolated", ".") == {"a.py": ALL}


def test_per_file_ignores(tmp_tree):
    root = tmp_tree({
        "pyproject.toml": pyproject('[tool.devlint.per-file-ignores]\n"tests/*" = ["DEV1"]\n"scripts/run.py" = ["DEV104"]\n"conftest.py" = ["DEV102"]\n'),
        "tests/unit/test_a.py": SOURCE,
        "scripts/run.py": SOURCE,
        "src/conftest.py": SOURCE,
        "src/model.py": SOURCE,
    })
    result = found(root, ".")
    assert "test_a.py" not in result  # `*` crosses folders
    assert result["run.py"] == {(2, "DEV102"), (3, "DEV101")}
    assert result["conftest.py"] == {(3, "DEV101"), (4, "DEV104")}  # a bare name matches in any folder
    assert result["model.py"] == ALL


def test_config_found_from_a_subfolder_and_from_the_first_path(tmp_tree):
    root = tmp_tree({"pyproject.toml": pyproject('ignore = ["DEV10"]\n'), "pkg/sub/a.py": SOURCE})
    assert run_devlint("check", "a.py", cwd=root / "pkg" / "sub").returncode == 0
    assert run_devlint("check", str(root / "pkg")).returncode == 0
    assert find(root / "pkg" / "sub" / "a.py") == root / "pyproject.toml"


def test_a_pyproject_without_the_table_is_skipped(tmp_tree):
    root = tmp_tree({
        "pyproject.toml": pyproject('ignore = ["DEV1"]\n'),
        "inner/pyproject.toml": "[project]\nname = 'inner'\n",
        "inner/a.py": SOURCE,
    })
    assert find(root / "inner") == root / "pyproject.toml"
    assert run_devlint("check", str(root / "inner")).returncode == 0


def test_exclude_and_extend_exclude_in_discovery(tmp_tree):
    root = tmp_tree({
        "pyproject.toml": pyproject('extend-exclude = ["legacy", "gen/*_pb2.py"]\n'),
        "src/a.py": SOURCE,
        "legacy/b.py": SOURCE,
        "src/legacy/c.py": SOURCE,
        "gen/x_pb2.py": SOURCE,
        "gen/keep.py": SOURCE,
        "build/d.py": SOURCE,  # still skipped: extend-exclude keeps the defaults
    })
    assert set(found(root, ".")) == {"a.py", "keep.py"}


def test_exclude_replaces_the_default_folders(tmp_tree):
    root = tmp_tree({"pyproject.toml": pyproject('exclude = ["src"]\n'), "src/a.py": SOURCE, "build/d.py": SOURCE})
    assert set(found(root, ".")) == {"d.py"}


def test_named_files_are_linted_unless_force_exclude(tmp_tree):
    root = tmp_tree({"pyproject.toml": pyproject('extend-exclude = ["legacy"]\n'), "legacy/b.py": SOURCE, "src/a.py": SOURCE})
    assert set(found(root, "legacy/b.py", "src/a.py")) == {"b.py", "a.py"}
    assert set(found(root, "--force-exclude", "legacy/b.py", "src/a.py")) == {"a.py"}
    assert found(root, "--force-exclude", "legacy") == {}


@pytest.mark.parametrize("body, words", [
    ('selct = ["DEV"]\n', "unknown key 'selct'"),
    ('select = "DEV101"\n', "select must be a list"),
    ("select = [\n", "pyproject.toml: not valid TOML"),
    ('select = ["DEV999"]\n', "unknown rule selector 'DEV999'"),
    ('[tool.devlint.per-file-ignores]\n"t/*" = ["E501"]\n', "unknown rule selector 'E501'"),
])
def test_bad_config_is_a_usage_error(tmp_tree, body, words):
    root = tmp_tree({"pyproject.toml": pyproject(body), "a.py": SOURCE})
    result = run_devlint("check", ".", cwd=root)
    assert result.returncode == 2 and words in result.stderr and "Traceback" not in result.stderr


def test_load_and_selection_api(tmp_path):
    (tmp_path / "pyproject.toml").write_text(pyproject('select = ["dev1"]\nper-file-ignores = { "t/*" = ["DEV102"] }\n'))
    config = load(tmp_path / "pyproject.toml")
    assert config.select == ["DEV1"] and config.root == tmp_path
    assert config.selection() == (["DEV1"], [])
    assert config.ignored_codes(str(tmp_path / "t" / "x.py")) == ["DEV102"]
    assert Config(root=tmp_path, ignore=["DEV102", "DEV2"]).selection(extend_select=["DEV10"]) == (["DEV", "DEV10"], ["DEV2"])
    with pytest.raises(ConfigError):
        (tmp_path / "pyproject.toml").write_text(pyproject("per-file-ignores = 3\n"))
        load(tmp_path / "pyproject.toml")
    assert path_matches(tmp_path / "a", "./a/", tmp_path) and not path_matches(tmp_path / "ab", "a", tmp_path)


def test_flake8_warns_once_about_a_bare_d(tmp_tree):
    root = tmp_tree({"a.py": SOURCE, "b.py": SOURCE})
    result = flake8("--extend-ignore=D", "a.py", "b.py", cwd=root)
    assert result.stderr.count("bare 'D'") == 1, result.stderr
    assert "DEV" not in result.stdout
    quiet = flake8("--extend-ignore=D1,D2", "a.py", cwd=root)
    assert "bare 'D'" not in quiet.stderr and "DEV102" in quiet.stdout
    not_selected = flake8("--select=E,F", "--extend-ignore=D", "a.py", cwd=root)
    assert "bare 'D'" not in not_selected.stderr  # DEV is not selected anyway: not D's doing
    reselected = flake8("--ignore=D", "--extend-select=DEV", "a.py", cwd=root)
    assert "bare 'D'" not in reselected.stderr and "DEV102" in reselected.stdout
