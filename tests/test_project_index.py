"""The project index (devlint/project): DEV111/DEV113/DEV114 across the files of a project,
through the CLI, flake8 and the language server, and the caches that depend on other files."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FINDING, ROOT, devlint, flake8, mismatches
from devlint.engine import lint
from devlint.project import ProjectIndex
from devlint.project.summary import summarize

PROJECTS = ROOT / "fixtures" / "projects"
FILES = sorted(p for p in PROJECTS.rglob("*.py"))


def _by_file(output: str) -> dict[str, set[tuple[int, str]]]:
    found: dict[str, set[tuple[int, str]]] = {}
    for line in output.splitlines():
        m = FINDING.match(line)
        if m:
            key = Path(m["path"]).resolve().relative_to(PROJECTS).as_posix()
            found.setdefault(key, set()).add((int(m["line"]), m["code"]))
    return found


def _problems(found) -> list[str]:
    problems = []
    for path in FILES:
        key = path.relative_to(PROJECTS).as_posix()
        problems += [f"{key}: {p}" for p in mismatches(path.read_text(), found.get(key, set()))]
    return problems


def test_fixture_projects_have_two_and_three_modules_a_package_and_a_cycle():
    assert {p.name for p in PROJECTS.iterdir()} >= {"two_modules", "package_relative", "models_cycle"}
    assert "from . import net" in (PROJECTS / "models_cycle/models/base.py").read_text()
    assert "from .base import" in (PROJECTS / "models_cycle/models/net.py").read_text()


def test_cli_reports_exactly_the_marked_findings_across_files():
    result = devlint("check", "--no-cache", str(PROJECTS))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert _problems(_by_file(result.stdout)) == []


def test_flake8_reports_exactly_the_marked_findings_across_files():
    result = flake8("--select=DEV", str(PROJECTS))
    assert result.returncode == 1, result.stderr
    assert _problems(_by_file(result.stdout)) == []


def test_every_cross_file_mark_needs_the_index():
    """Linted alone, the files lose exactly the findings that read another file."""
    alone = set()
    with_index = set()
    index = ProjectIndex()
    for path in FILES:
        text = path.read_text()
        alone |= {(path.name, f.line, f.code) for f in lint(text, str(path))}
        with_index |= {(path.name, f.line, f.code) for f in lint(text, str(path), project=index.view(str(path)))}
    assert alone < with_index
    gained = with_index - alone
    assert {c for _, _, c in gained} == {"DEV111", "DEV113", "DEV114"}
    assert ("net.py", 10, "DEV113") in gained and ("net.py", 16, "DEV113") in gained


def test_summaries_say_only_what_every_return_shows():
    functions = summarize((PROJECTS / "two_modules/helpers.py").read_text())["functions"]
    assert functions["move_to_device"] == "moves" and functions["build_loader"] == "loader"
    assert functions["make_batch"] == "cpub"
    assert "flatten" not in functions  # recursion alone moves nothing
    assert "build_device_loader" not in functions  # its collate_fn places the batch
    data = summarize((PROJECTS / "package_relative/pkg/data.py").read_text())["functions"]
    assert data == {"build_loaders": "loaders", "load_features": "cpu"}
    utils = summarize((PROJECTS / "package_relative/pkg/utils.py").read_text())["functions"]
    assert utils["to_device"] == "moves"  # moved in place, then returned
    maybe = summarize("def f(x, d, on):\n    if on:\n        return x.to(d)\n    return x.float()\n")
    assert maybe["functions"] == {}
    assert summarize("def f(:\n")["functions"] == {}
    placed = summarize(
        "import torch\n"
        "def mask_for(x):\n    m = torch.ones(3, 3)\n    return m.to(x.device)\n"  # a new tensor, not x
        "def follow(x, ref):\n    return x.to(ref.device)\n"  # on ref's device, whatever it is
        "def to_run_device(x, cfg):\n    return x.to(cfg.device)\n"
        "def loader(ds, pad):\n    return torch.utils.data.DataLoader(ds, collate_fn=pad)\n"
        "def gpu_loader(ds):\n    return torch.utils.data.DataLoader(ds, collate_fn=lambda b: b.cuda())\n"
    )["functions"]
    assert placed == {"to_run_device": "moves", "loader": "loader"}


def test_an_import_cycle_of_base_classes_ends(tmp_tree):
    root = tmp_tree({
        "pyproject.toml": "",
        "a.py": "from b import B\nclass A(B):\n    pass\n",
        "b.py": "from a import A\nclass B(A):\n    pass\n",
        "c.py": "import torch\nfrom a import A\nclass C(A):\n    def __init__(self):\n        self.layers = [torch.nn.Linear(2, 2)]\n",
    })
    assert lint((root / "c.py").read_text(), str(root / "c.py"), project=ProjectIndex().view(str(root / "c.py"))) == []
    # and the walk still resolves through the cycle: once one class of it is a module, C is one
    (root / "b.py").write_text("import torch\nfrom a import A\nclass B(A, torch.nn.Module):\n    pass\n")
    (root / "c.py").write_text((root / "c.py").read_text() + "\n    def forward(self, x):\n        return x\n")
    found = lint((root / "c.py").read_text(), str(root / "c.py"), project=ProjectIndex().view(str(root / "c.py")))
    assert [(f.line, f.code) for f in found] == [(5, "DEV114")]


HELPER = "from torch.utils.data import DataLoader\n\ndef build(ds):\n    return DataLoader(ds)\n"
LOOP = (
    "import torch\nfrom helper import build\n\n"
    "def main(ds, device):\n    model = torch.nn.Linear(2, 2).to(device)\n"
    "    for x in build(ds):\n        model(x)\n"
)


def test_the_findings_cache_relints_the_importers_of_a_changed_helper(tmp_tree):
    root = tmp_tree({"pyproject.toml": "[tool.devlint]\n", "helper.py": HELPER, "train.py": LOOP})
    assert "train.py:7:9: DEV111" in devlint("check", str(root), cwd=root).stdout
    assert "train.py:7:9: DEV111" in devlint("check", str(root), cwd=root).stdout  # served by the cache
    (root / "helper.py").write_text(HELPER.replace("return DataLoader(ds)", "return ds"))
    assert "DEV111" not in devlint("check", str(root), cwd=root).stdout
    (root / "helper.py").write_text(HELPER)
    assert "train.py:7:9: DEV111" in devlint("check", str(root), cwd=root).stdout


def test_the_server_lints_across_files_and_relints_importers_of_an_edited_buffer(tmp_path):
    pytest.importorskip("pygls")
    from test_server import Client, codes

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "train.py").write_text(LOOP)
    client = Client(cwd=tmp_path)
    try:
        client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})
        client.send("initialized", {})
        train, helper = (tmp_path / "train.py").as_uri(), (tmp_path / "helper.py").as_uri()
        assert codes(client.open(train, LOOP)) == [("DEV111", 6)]
        client.open(helper, HELPER)
        client.change(helper, HELPER.replace("return DataLoader(ds)", "return ds"), 2)
        assert codes(client.diagnostics(train)) == []  # the importer, linted again unasked
        client.change(helper, HELPER, 3)
        assert codes(client.diagnostics(train)) == [("DEV111", 6)]
        client.send("textDocument/didClose", {"textDocument": {"uri": helper}})
        (tmp_path / "helper.py").write_text(HELPER.replace("return DataLoader(ds)", "return ds"))  # saved elsewhere
        client.send("workspace/didChangeWatchedFiles", {"changes": [{"uri": helper, "type": 2}]})
        assert codes(client.diagnostics(train)) == []
    finally:
        client.close()


#: pieces of texts holding imports and class headers, whole or broken, at line starts or not
_LINE_PIECES = ["import", "from", "class", " ", "\t", "  ", "\n", "\r", "\r\n", "\f", "x", "a.b", "os", ".", "..", "(", ")",
                ",", "#", ";", "\\\n", "as", " import ", "from a import (b,\n c)", "class A(nn.Module)", "import x, y as z",
                "    from . import m", "xfrom a import b", "é", "class  B (\n  Base,\n)"]


def test_line_anchored_patterns_found_from_their_keyword_match_the_anchored_search():
    """index.at_line_start gives the matches (groups, ends) of the ``^[ \\t]*keyword`` patterns
    that ``finditer`` gives, on random texts."""
    import random

    from devlint.project.index import _BASES, _FROM, _IMPORT, at_line_start

    rng = random.Random(11)
    found = 0
    for _ in range(6000):
        text = "".join(rng.choice(_LINE_PIECES) for _ in range(rng.randrange(1, 16)))
        for pattern in (_IMPORT, _FROM, _BASES):
            want = [(m.end(), m.groups()) for m in pattern.finditer(text)]
            assert [(m.end(), m.groups()) for m in at_line_start(pattern, text)] == want, (pattern.pattern, text)
            found += len(want)
    assert found > 2000, found
    # a rejected match (not at a line start) that spans lines holds a match of the next line
    for text, pattern in (("xfrom a import (b,\nfrom c import d)\n", _FROM), ("x class A(\nclass B(C)\n", _BASES)):
        assert [m.groups() for m in at_line_start(pattern, text)] == [m.groups() for m in pattern.finditer(text)] != []
