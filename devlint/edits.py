"""Small builders for the text of autofixes: calls with arguments added, keyword arguments.

Rules produce :class:`devlint.rule.NodeFix` replacements; these helpers render a changed
node back to source with libcst, so that everything the fix does not touch (comments inside
the parentheses, line breaks, trailing commas) is kept byte for byte.
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

_PRINTER = cst.Module(body=[])
_NO_SPACE = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def code(node: cst.CSTNode) -> str:
    """The source text of a node (an expression or small statement)."""
    return _PRINTER.code_for_node(node)


def arg(value: str | cst.BaseExpression, keyword: str | None = None) -> cst.Arg:
    """An argument ``value`` or ``keyword=value`` (no spaces around ``=``, PEP 8)."""
    if isinstance(value, str):
        value = cst.parse_expression(value)
    if keyword is None:
        return cst.Arg(value)
    return cst.Arg(value, keyword=cst.Name(keyword), equal=_NO_SPACE)


def as_keyword(argument: cst.Arg, keyword: str) -> cst.Arg:
    """A positional argument given as ``keyword=value`` instead (its comma kept)."""
    return argument.with_changes(keyword=cst.Name(keyword), equal=_NO_SPACE)


def call(node: cst.Call, args: Sequence[cst.Arg], func: cst.BaseExpression | str | None = None) -> str:
    """The text of ``node`` with its arguments replaced by ``args`` (and its callee by
    ``func``). Commas between arguments are added where missing; the original arguments keep
    their own commas and whitespace."""
    args = list(args)
    for i, item in enumerate(args[:-1]):
        if isinstance(item.comma, cst.MaybeSentinel):
            args[i] = item.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    if args and not node.args:
        last = args[-1]
        if not isinstance(last.comma, cst.MaybeSentinel):
            args[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    changes: dict = {"args": args}
    if func is not None:
        changes["func"] = cst.parse_expression(func) if isinstance(func, str) else func
    return code(node.with_changes(**changes))


def positional(node: cst.Call) -> list[cst.Arg]:
    """The plain positional arguments of a call (no ``*args``)."""
    return [a for a in node.args if a.keyword is None and not a.star]


def append_keyword(node: cst.Call, keyword: str, value: str) -> str:
    """The call with ``keyword=value`` added after its last argument."""
    args = list(node.args)
    new = arg(value, keyword)
    if args and not isinstance(args[-1].comma, cst.MaybeSentinel):
        # f(a,) or a trailing comma before a line break: the new argument keeps the layout
        new = new.with_changes(comma=args[-1].comma)
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call(node, [*args, new])
