"""What an analysis computes from an immutable node is kept from one lint of a document to the
next (devlint/node_memo.py, through ``Context.remembered``), and only for the nodes asked for."""

from __future__ import annotations

import libcst as cst

from devlint.context import Context


def _lint(memo: dict, nodes, calls: list) -> list:
    ctx = Context("a.py", "")
    ctx.keep_between_lints(memo)
    results = [ctx.remembered("kind", node, lambda node=node: calls.append(node) or node.value) for node in nodes]
    ctx.done_with_lint(memo)
    return results


def test_a_result_is_made_once_per_node_while_the_memo_is_kept():
    a, b = cst.Name("a"), cst.Name("b")
    memo: dict = {}
    calls: list = []
    assert _lint(memo, [a, b], calls) == ["a", "b"] and calls == [a, b]
    assert _lint(memo, [a], calls) == ["a"] and calls == [a, b]  # kept: not made again
    assert _lint(memo, [a, b], calls) == ["a", "b"] and calls == [a, b, b]  # b was not asked for last time


def test_without_a_memo_every_result_is_made():
    a = cst.Name("a")
    calls: list = []
    ctx = Context("a.py", "")
    ctx.keep_between_lints(None)
    assert [ctx.remembered("kind", a, lambda: calls.append(a) or 1) for _ in range(2)] == [1, 1]
    assert calls == [a, a]
