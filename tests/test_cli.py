"""``devlint check``: output, sorting, summary, exit codes, selection, ``# noqa``."""

from __future__ import annotations

import devlint

from conftest import devlint as run_devlint, flake8, parse_findings

SOURCE = """import torch
a = torch.ones(1).cuda()
b = torch.ones(1, device="cuda")
c = torch.load("x.pt")
"""


def test_clean_tree_exits_zero(tmp_tree):
    root = tmp_tree({"ok.py": "import torch\nx = torch.ones(1)\n", "notes.txt": "cuda"})
    result = run_devlint("check", str(root))
    assert result.returncode == 0 and "All checks passed" in result.stdout


def test_findings_sorted_with_summary_and_exit_one(tmp_tree):
    root = tmp_tree({"b.py": SOURCE, "a.py": SOURCE})
    result = run_devlint("check", str(root))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].endswith("a.py:2:19: DEV102 .cuda() pins this to CUDA: use .to(device)")
    assert [l.split(":")[0][-4:] for l in lines[:6]] == ["a.py"] * 3 + ["b.py"] * 3
    assert lines[-1] == "Found 6 findings in 2 of 2 files (2 fixable with `--fix --unsafe-fixes`)."  # DEV104


def test_select_and_ignore_by_prefix(tmp_tree):
    root = tmp_tree({"a.py": SOURCE})
    only = parse_findings(run_devlint("check", "--select", "DEV102", str(root)).stdout)
    assert only == {"a.py": {(2, "DEV102")}}
    rest = parse_findings(run_devlint("check", "--ignore", "DEV10", "--select", "DEV104", str(root)).stdout)
    assert rest == {"a.py": {(4, "DEV104")}}
    none = run_devlint("check", "--ignore", "DEV1", str(root))
    assert none.returncode == 0


def test_usage_errors_exit_two():
    assert run_devlint("check", "--no-such-flag").returncode == 2
    assert run_devlint("check", "--select", "XYZ").returncode == 2
    assert run_devlint("frobnicate").returncode == 2


def test_version():
    result = run_devlint("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"devlint {devlint.__version__}"


NOQA = """import torch
a = torch.ones(1).cuda()  # noqa
b = torch.ones(1).cuda()  # noqa: DEV102
c = torch.ones(1).cuda()  # noqa: DEV101
d = torch.ones(1).cuda()  # NOQA:DEV1
e = torch.ones(1).cuda()  # noqa: E501,DEV102
f = torch.ones(
    1).cuda()  # noqa: DEV102
g = torch.ones(1,
    device="cuda")  # noqa
h = torch.ones(1).cuda()  # noqa : DEV101
"""


def test_noqa_matches_flake8_exactly(tmp_tree):
    root = tmp_tree({"n.py": NOQA})
    cli = parse_findings(run_devlint("check", str(root)).stdout)
    f8 = parse_findings(flake8("--select=DEV", str(root)).stdout)
    assert cli == f8
    # only line 4 survives: its noqa names another code. `# noqa : DEV101` (space before the
    # colon) is a bare noqa to flake8, and DEV102 sits on the `.cuda` token's line (8).
    assert cli == {"n.py": {(4, "DEV102")}}


def test_file_level_noqa(tmp_tree):
    root = tmp_tree({"n.py": "# flake8: noqa\n" + SOURCE})
    assert run_devlint("check", str(root)).returncode == 0


def test_directories_skip_virtualenvs_and_caches(tmp_tree):
    root = tmp_tree({
        "pkg/a.py": SOURCE,
        "venv1/pyvenv.cfg": "home = /usr",
        "venv1/lib/b.py": SOURCE,
        ".git/c.py": SOURCE,
        "pkg/__pycache__/d.py": SOURCE,
    })
    found = parse_findings(run_devlint("check", str(root)).stdout)
    assert set(found) == {"a.py"}


def test_stdin(tmp_tree):
    result = run_devlint("check", "-", stdin=SOURCE)
    assert parse_findings(result.stdout) == {"-": {(2, "DEV102"), (3, "DEV101"), (4, "DEV104")}}


def test_rule_docs_command():
    listing = run_devlint("rule", "--all").stdout
    assert "DEV101" in listing and "hardcoded-accelerator-device" in listing
    docs = run_devlint("rule", "DEV102")
    assert docs.returncode == 0 and "## Why is this bad?" in docs.stdout
    assert run_devlint("rule", "DEV999").returncode == 2
