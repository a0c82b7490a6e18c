"""The per-statement parse cache gives the module (and the findings) a full parse gives, and
re-parses only the statements an edit touches; the server's text helpers."""

from __future__ import annotations

import random

import libcst as cst
import pytest

from devlint.engine import lint, lint_module
from devlint.finding import Finding
from devlint.incremental import StatementCache, common_prefix, common_suffix
from devlint.lsp.document_lint import DocumentState, carried, lint_text
from devlint.lsp.encoding import from_units, to_units

from conftest import LINT_FIXTURES

EDITS = ("insert", "delete", "duplicate", "char", "dedent", "blank", "comment", "join", "indent")


def edit(lines: list[str], rng: random.Random) -> str:
    k = rng.randrange(len(lines))
    new = list(lines)
    kind = rng.choice(EDITS)
    if kind == "insert":
        new.insert(k, rng.choice(["x = y.cuda()\n", "    z = 1\n", "@dec\n", "if a:\n", "import torch\n"]))
    elif kind == "delete":
        del new[k]
    elif kind == "duplicate":
        new.insert(k, lines[k])
    elif kind == "char":
        i = rng.randrange(len(lines[k]) + 1)
        new[k] = lines[k][:i] + rng.choice("ab( ):\n#'\"\\") + lines[k][i:]
    elif kind == "dedent":
        new[k] = lines[k].lstrip()
    elif kind == "blank":
        new.insert(k, "\n")
    elif kind == "comment":
        new.insert(k, rng.choice(["# c\n", "    # c\n"]))
    elif kind == "join":
        new[k] = lines[k].rstrip("\n")
    else:
        new[k] = "    " + lines[k]
    return "".join(new)


@pytest.mark.parametrize("name", ["r10_report.py", "r12_report.py", "r20_report.py", "seed_reference_example.py"])
def test_random_edits_give_the_full_parse_and_its_findings(name):
    rng = random.Random(name)
    text = (LINT_FIXTURES / name).read_text()
    cache = StatementCache()
    cache.parse(text)
    compared = partial = 0
    for _ in range(40):
        new = edit(text.splitlines(keepends=True) or ["\n"], rng)
        try:
            cst.parse_module(new)
        except cst.ParserSyntaxError:
            with pytest.raises(cst.ParserSyntaxError):
                cache.parse(new)
            continue
        module = cache.parse(new)
        assert module.code == new
        partial += not cache.stats.full
        assert lint_module(module, new, name, tree=cache.ast_stand_in()) == lint(new, name)
        compared += 1
        text = new
    assert compared >= 20 and partial >= compared - 2


def test_an_edit_reparses_one_statement():
    text = "".join(f"def f{k}(x):\n    return x + {k}\n\n\n" for k in range(50))
    cache = StatementCache()
    cache.parse(text)
    assert cache.stats.full and cache.stats.reparsed == 50
    cache.parse(text.replace("x + 7\n", "x + 77\n"))
    assert not cache.stats.full and cache.stats.reparsed == 1
    # typing at the start of a statement's blank lines re-parses the one above as well
    cache.parse(text)
    module = cache.parse(text.replace("\n\n\ndef f9(", "\n    y = 1\n\ndef f9("))
    assert not cache.stats.full and cache.stats.reparsed == 2 and len(module.body) == 50


def test_an_edit_inside_a_method_reparses_that_statement_only():
    methods = "".join(f"    def f{k}(self, x):\n        y = x + {k}\n        if y:\n            y += 1\n        return y\n\n" for k in range(30))
    text = f"import torch\n\n\nclass A:\n{methods}\nz = 1\n"
    cache = StatementCache()
    cache.parse(text)
    edits = [
        text.replace("y = x + 7\n", "y = x + 77\n"),  # a statement of a method
        text.replace("            y += 1\n        return y\n\n    def f4(", "            y += 2\n        return y\n\n    def f4("),
        text.replace("    def f9(self", "    # a comment\n    def f9(self"),  # a comment above a method
        text.replace("    def f9(self, x):\n        y = x + 9\n", "    def f9(self, x):\n        y = x + 9\n        # note\n"),
        text.replace("        return y\n\n    def f12(", "        return y\n        z = 3\n\n    def f12("),  # a method's last line
        text.replace("    def f3(self, x):\n        y = x + 3\n        if y:\n            y += 1\n        return y\n\n", ""),
        text.replace("y = x + 5\n", "y = (x +\n"),  # does not parse
    ]
    inner = 0
    for new in edits:
        cache.parse(text)
        try:
            expected = cst.parse_module(new)
        except cst.ParserSyntaxError:
            with pytest.raises(cst.ParserSyntaxError):
                cache.parse(new)
            continue
        module = cache.parse(new)
        assert module.code == new and module.deep_equals(expected)
        assert not cache.stats.full
        inner += cache.stats.reparsed <= 2
        assert lint_module(module, new, "a.py", tree=cache.ast_stand_in()) == lint(new, "a.py")
    assert inner >= 4


def test_prefix_and_suffix():
    assert common_prefix("abcdef", "abcxef") == 3 and common_suffix("abcdef", "abcxef", 3) == 2
    assert common_prefix("", "a") == 0 and common_suffix("aaa", "aaaa", 3) == 3


def test_findings_of_unchanged_lines_are_carried_over():
    old = "a\nb\nc\nd\n"
    found = [Finding("p", 1, 0, "DEV1", "m", 1, 1), Finding("p", 2, 0, "DEV2", "m", 2, 1), Finding("p", 4, 0, "DEV4", "m", 4, 1)]
    kept = carried(old, found, "a\nB\nB2\nc\nd\n")
    assert [(f.code, f.line) for f in kept] == [("DEV1", 1), ("DEV4", 5)]


def test_a_broken_buffer_keeps_the_findings_of_unchanged_lines():
    state = DocumentState()
    good = "import torch\nx = torch.ones(1).cuda()\n"
    assert [f.code for f in lint_text(good, None, state)] == ["DEV102"]
    broken = [(f.code, f.line) for f in lint_text(good + "def f(\n", None, state)]
    assert broken == [("DEV102", 2), ("DEV000", 3)]


def test_utf16_and_utf8_units():
    line = 'a = "\U0001F600é"; b'
    column = line.index("; b")
    assert to_units(line, column) == column + 1
    assert to_units(line, column, "utf-8") == len(line[:column].encode())
    assert to_units(line, column, "utf-32") == column
    for encoding in ("utf-16", "utf-8", "utf-32"):
        assert from_units(line, to_units(line, column, encoding), encoding) == column
    assert to_units("\ud800x", 1) == 1 and from_units("\ud800x", 1) == 1


NOQA_PIECES = ('"""', "'''", "(", ")", "]", "{", "\\\n", "  # noqa\n", "\n", "    ", "\t", "'", "\f", "\r\n", "\r",
               "x = (1,\n", "if a:\n  b\n", "s = '''\n", "pass\n")


@pytest.mark.parametrize("name", ["r10_report.py", "seed_reference_example.py"])
def test_the_noqa_line_map_of_random_edits_is_the_full_one(name):
    from devlint.lsp.noqa_lines import LineGroups
    from devlint.noqa import _line_map

    rng = random.Random(name)
    base = (LINT_FIXTURES / name).read_text()
    text = "class Big:\n" + "".join(f"    def m{k}(self, x):  # noqa: DEV1{k}\n        return (x,\n            {k})\n\n"
                                   for k in range(40)) + base
    groups = LineGroups()
    partial = eligible = 0
    ready = False
    for _ in range(120):
        at = rng.randrange(len(text) + 1)
        if rng.random() < 0.6:
            new = text[:at] + rng.choice(NOQA_PIECES) + text[at:]
        else:
            new = text[:at] + text[at + rng.randrange(1, 6):]
        mapping = groups.mapping(new)
        expected = _line_map(new)
        got = {line: mapping.get(line) for line in range(len(groups.groups) + 2) if mapping.get(line) is not None}
        assert got == expected
        if expected:  # it tokenizes: the next edit starts from it (else from the last one that did)
            partial += ready and 0 < groups.tokenized < len(groups.groups) // 2
            eligible += ready
            text = new
        ready = bool(expected)  # the map of a text that tokenized is kept for the next edit
    assert partial >= eligible * 3 // 4 and eligible >= 20  # most edits re-tokenized a small part only
