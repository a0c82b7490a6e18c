"""devlint.positions gives libcst's PositionProvider's numbers, statement by statement."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from devlint.positions import as_range, statement_ranges

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "fixtures" / "lint").rglob("*.py")) + sorted((ROOT / "devlint").glob("*.py"))[:8]
ODD = ["x = (1,\r\n     2)\r\ny = 'a\\\r\nb'\n", "if 1:\n\tx = [\n  1]  # c\n\n\n# c\ndef f():\n    '''a\n\n    b'''\n",
       "@d\n\n# c\nclass A(B, metaclass=M):\n    x: int = 1\n    def f(self, /, a, *, b=2) -> 'A':\n        return (yield)\n"]


@pytest.mark.parametrize("text", [*ODD, *(f.read_text() for f in FILES)], ids=[*map(str, range(len(ODD))), *(f.name for f in FILES)])
def test_same_ranges_as_position_provider(text):
    module = cst.parse_module(text)
    for statement in module.body:
        single = module.with_changes(body=[statement], header=(), footer=())
        expected = MetadataWrapper(single, unsafe_skip_copy=True).resolve(PositionProvider)
        got = statement_ranges(statement, module.default_indent, module.default_newline)
        assert got == {id(n): (r.start.line, r.start.column, r.end.line, r.end.column)
                       for n, r in expected.items() if n is not single}
        assert as_range(got[id(statement)]) == expected[statement]


def _names(node):
    stack, found = [node], []
    while stack:
        item = stack.pop()
        if isinstance(item, cst.Name):
            found.append(item)
        stack.extend(item.children)
    return found


@pytest.mark.parametrize("text", [*ODD[1:], "x1 = y.cuda()\nz = 1  # x1\nw = (w2).cuda()\n@d\ndef f(a):\n    return a\n",
                                  *(f.read_text() for f in FILES[:40])], ids=lambda t: str(len(t)))
def test_names_placed_from_the_text_as_position_provider(text):
    """Each name reported alone (the text search's case, or the renderer's where its value
    is not unique) gets PositionProvider's range; a text search that went wrong shows here."""
    import ast

    from devlint import parsing
    from devlint.positions import reported_ranges

    module = cst.parse_module(text)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    tops = parsing.top_starts(ast.parse(text))
    checked = 0
    for index, statement in enumerate(module.body):
        for name in _names(statement):
            got = reported_ranges(module, text, {index: [name]}, tops)
            assert got[name] == expected[name], (index, name.value)
            checked += 1
    assert checked or not module.body


def test_a_name_reported_with_another_statements_index_is_found_where_it_is():
    text = "a = cuda\nb = cuda + 1\n"
    module = cst.parse_module(text)
    first = module.body[0].body[0].value
    got = reported_ranges_of(module, text, {1: [first]})
    assert (got[first].start.line, got[first].start.column) == (1, 4)


def reported_ranges_of(module, text, wanted):
    import ast

    from devlint import parsing
    from devlint.positions import reported_ranges

    return reported_ranges(module, text, wanted, parsing.top_starts(ast.parse(text)))
