"""The server reports what ``devlint check`` reports for the inputs of issue 24 (items 1, 2):
a form feed in a statement's indentation, a NUL byte, syntax the target Python refuses (the
running one, or ``target-version``), also when the edit that brings it is typed inside a
class that the statement cache re-parses in part."""

from __future__ import annotations

import pytest

from devlint import memory_budget, syntax
from devlint.lsp.document_lint import DocumentState, lint_text
from devlint.lsp.settings import Settings
from devlint.runner import check_source

RUNNING = syntax._RUNNING
ISSUE_24 = [
    "try:\n\f with ():\n  x.cuda()\nexcept: pass\n",  # item 1, minimised
    "import torch\ntry:\n\f with ():\n  x = torch.ones(1).cuda()\nexcept: pass\n",
    "import torch\ndef f():\n\f  \f    return torch.ones(1).cuda()\n",
    "import torch\nx = torch.ones(1).cuda()\ns = 'a\x00b'\n",  # item 2: a NUL in a string
    "import torch\nx = torch.ones(1).cuda()  # noqa\ns = 'a\x00b'  # noqa\n",
    "import torch\nd = {'k': 1}\nx = torch.ones(1).cuda()\ny = f\"{d[\"k\"]}\"\n",  # PEP 701 on an older target
]


def cli(text: str, path: str) -> list:
    return check_source(text.encode(), path, ["DEV"], [])


@pytest.mark.parametrize("text", ISSUE_24)
def test_the_issue_inputs_give_the_clis_findings(text):
    path = "/nonexistent-devlint-test/a.py"
    expected = cli(text, path)
    assert lint_text(text, path, DocumentState()) == expected
    if "\x00" in text or 'f"{d["' in text and RUNNING < (3, 12):
        assert [f.code for f in expected] == ["DEV000"] or "noqa" in text


CLASS = "import torch\n\n\nclass Loop:\n" + "".join(
    f"    def step{k}(self, x):\n        y = x + {k}\n        return y.cuda()\n\n" for k in range(12))


def test_a_target_version_refusal_typed_inside_a_class(tmp_path):
    """``target-version = "py39"`` refuses ``match``: typed inside a method (the cache
    re-parses a stand-in of that method only) it is the CLI's DEV000, and deleting it gives
    the findings back; the default target accepts it."""
    (tmp_path / "pyproject.toml").write_text('[tool.devlint]\ntarget-version = "py39"\n')
    path = str(tmp_path / "loop.py")
    state, settings = DocumentState(), Settings()
    with_match = CLASS.replace("        y = x + 5\n", "        match x:\n            case 1:\n                y = 5\n")
    try:
        assert lint_text(CLASS, path, state, settings) == cli(CLASS, path)
        got = lint_text(with_match, path, state, settings)
        assert not state.cache.stats.full
        syntax.set_target_version((3, 9))
        expected = cli(with_match, path)
        assert got == expected and [f.code for f in expected] == ["DEV000"] and expected[0].line == 29
        syntax.set_target_version(None)
        again = lint_text(CLASS, path, state, settings)
        assert again == cli(CLASS, path) and len(again) == 12
    finally:
        syntax.set_target_version(None)
    alone = "/nonexistent-devlint-test/loop.py"  # no pyproject.toml above it: the running Python
    fresh = DocumentState()
    assert lint_text(CLASS, alone, fresh, settings) == cli(CLASS, alone)
    assert lint_text(with_match, alone, fresh, settings) == cli(with_match, alone) != cli(CLASS, alone)


# ---- item 5: over the memory budget, the server takes the CLI's decision ---------------------

def small_budget(monkeypatch, lines: int) -> None:
    """A 1 MB budget that ``lines`` lines fill (nothing else costs), pieces of 4 lines."""
    monkeypatch.setattr(memory_budget, "PIECE_LINES", 4)
    monkeypatch.setattr(memory_budget, "MEMORY_BUDGET_MB", 1)
    for name in ("PROCESS_BYTES", "TEXT_COPIES", "TEXT_BYTES_PER_LINE", "TOKEN_BYTES", "CHAR_COPIES",
                 "PARSE_BYTES", "DEPTH_BYTES"):
        monkeypatch.setattr(memory_budget, name, 0)
    monkeypatch.setattr(memory_budget, "LINE_BYTES", (1 << 20) // lines)


@pytest.mark.parametrize("newline, expected", [
    ("\n", "lines 21-40 skipped: over the 1 MB memory budget, split the file"),  # cut in pieces
    ("\r\n", "could not parse: 40 lines, over the 1 MB memory budget, with no cut that parses, line 1"),
])
def test_over_the_budget_the_server_reports_the_clis_dev000(monkeypatch, newline, expected):
    """40 short lines, a budget of 20: far under the server's old 150,000-line limit, so it
    analysed them all; now both take :func:`devlint.memory_budget.over_budget`'s decision."""
    small_budget(monkeypatch, 20)
    text = newline.join(["import torch", *(f"x{i} = torch.ones(1).cuda()" for i in range(39))]) + newline
    path = "/nonexistent-devlint-test/long.py"
    expected_cli = cli(text, path)
    assert [f.message for f in expected_cli if f.code == "DEV000"] == [expected]
    assert lint_text(text, path, DocumentState()) == expected_cli


def test_deep_brackets_are_refused_by_the_server_as_by_the_cli():
    """30 lines of calls 100 deep (libcst would hold most of a gigabyte parsing them): one
    DEV000 from both, with the real budget."""
    text = "import torch\n" + "".join(f"x{i} = " + "f(" * 100 + "y.cuda()" + ")" * 100 + "\n" for i in range(30))
    path = "/nonexistent-devlint-test/deep.py"
    expected = cli(text, path)
    assert [f.code for f in expected] == ["DEV000"] and "over the 600 MB memory budget" in expected[0].message
    assert lint_text(text, path, DocumentState()) == expected
