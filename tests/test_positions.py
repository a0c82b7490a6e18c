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
