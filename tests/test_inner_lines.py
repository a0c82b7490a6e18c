"""The lines of a statement counted per node (devlint.inner_positions.lines_of, which the
server's statement cache and the placement of findings inside a long class use) equal the
lines of its rendering, for every statement in an indented body of the project's own files and
fixtures, ``elif``/``else`` clauses included; and a statement is rendered whole only when it has
an ``else`` that is not an indented block (or ``except``/``finally``, a ``match``)."""

from __future__ import annotations

import libcst as cst

from conftest import ROOT
from devlint.inner_positions import lines_of
from devlint.node_memo import NodeMemo

ELSE_TEXT = '''class A:
    def f(self, x):
        if x:  # one
            y = 1
        # before elif
        elif x > 1 \\
                and x < 3:
            y = 2

            # footer of elif
        else  :  # else comment
            y = 3
        for i in x:
            pass
        else:
            # inside
            z = (1,
                 2)
            # footer of for-else

        while x:
            break
        else: pass
        return y
'''


def _statements(module: cst.Module):
    stack = [module]
    while stack:
        node = stack.pop()
        for child in node.children:
            if isinstance(child, cst.IndentedBlock):
                yield from child.body
            stack.append(child)


def _files():
    yield "else", ELSE_TEXT
    for folder in ("devlint", "fixtures/lint", "fixtures/projects"):
        for path in sorted((ROOT / folder).rglob("*.py"))[:40]:
            yield path.name, path.read_text(encoding="utf-8")


def test_lines_counted_per_node_are_those_of_the_rendering(monkeypatch):
    rendered = []
    real = cst.Module.code_for_node
    monkeypatch.setattr(cst.Module, "code_for_node", lambda self, node: rendered.append(node) or real(self, node))
    checked = clauses = 0
    for name, text in _files():
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:
            continue
        state = NodeMemo({})
        for statement in _statements(module):
            rendered.clear()
            count = lines_of(module, statement, state)
            assert count == real(module, statement).count("\n"), (name, real(module, statement)[:200])
            checked += 1
            if isinstance(statement, (cst.If, cst.For, cst.While)) and statement.orelse is not None:
                clauses += 1
                whole = [n for n in rendered if n is statement]
                assert not whole or not isinstance(statement.orelse.body, cst.IndentedBlock), name
    assert checked > 1000 and clauses > 30
