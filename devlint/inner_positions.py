"""Positions of reported nodes without rendering the whole top-level statement that holds them.

The engine places a finding by rendering its top-level statement alone with libcst's
``PositionProvider`` (:func:`devlint.positions.reported_ranges`). In a class of thousands of lines (a
``Trainer``) that rendering costs more than the lint, and the language server did it on every
keystroke, since an edit makes a new class node. :func:`place_inside` descends instead from the
top-level statement into the indented body of each ``class``/``def``/``if``/``for``/``while``/
``with`` down to the innermost statement that holds a group of reported nodes, and renders only
that statement inside a stand-in of its enclosing blocks (their headers and indentation, no
other statement), so columns are those of the file. Its first line is the top-level statement's
plus the lines of the enclosing headers and of the statements before it in each body (counted
once per immutable node and kept in ``memo``). Rendering a statement adds no line between its
siblings, so the lines are those of the whole rendering; a text with a lone ``\\r`` newline is
left to the caller (line counting assumes ``\\n``).

Only the language server calls this (the engine's ``memo`` is given); ``devlint check`` keeps
rendering whole statements, so the equivalence tests of the server against ``devlint check``
(tests/test_server_exact.py, tests/test_server_incremental.py) check these positions.
"""

from __future__ import annotations

from typing import Callable, Iterable

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from .node_memo import NodeMemo

#: Compound statements whose indented body is descended into; their ``orelse`` (if any) is
#: dropped from the stand-in, which changes no line before the body.
_OWNERS = (cst.FunctionDef, cst.ClassDef, cst.If, cst.For, cst.While, cst.With)
_DEPTH = 6
#: key of this module's entries in the engine's per-document memo
KEY = "inner"
_PASS = cst.SimpleStatementLine(body=[cst.Pass()])

Children = Callable[[cst.CSTNode], Iterable[cst.CSTNode]]


def _anchor(statement: cst.CSTNode) -> cst.CSTNode:
    """The node whose start line is the statement's first line of code (past its comments)."""
    decorators = getattr(statement, "decorators", None)
    return decorators[0] if decorators else statement


def lead_lines(statement: cst.CSTNode) -> int:
    """Lines of blank lines and comments above the statement's anchor."""
    count = len(getattr(statement, "leading_lines", ()))
    decorators = getattr(statement, "decorators", None)
    return count + (len(decorators[0].leading_lines) if decorators else 0)


def _block(owner: cst.CSTNode) -> bool:
    return isinstance(owner, _OWNERS) and isinstance(owner.body, cst.IndentedBlock)


def _ids(node: cst.CSTNode, children: Children, stop: frozenset = frozenset()) -> frozenset:
    """``id`` of ``node`` and of every node below it (the engine's walk), not entering ``stop``."""
    found, stack = set(), [node]
    while stack:
        item = stack.pop()
        found.add(id(item))
        stack.extend(c for c in children(item) if id(c) not in stop)
    return frozenset(found)


def place_inside(module: cst.Module, index: int, start: int, nodes: list, found: dict, memo: dict,
                 children: Children) -> bool:
    """Put in ``found`` (node -> ``CodeRange``) the positions of ``nodes``, reported in the
    top-level statement ``module.body[index]`` whose anchor (first decorator or keyword) is on
    line ``start``, rendering only the innermost statements that hold them. Returns False,
    placing nothing, when some node is not below a statement of an indented body (in a header,
    or not in this statement at all): the caller then renders the whole statement as before.
    ``memo`` is the engine's per-document dict; this keeps its entries under :data:`KEY`."""
    statement = module.body[index]
    if not _block(statement):
        return False
    state = NodeMemo(memo.get(KEY) or {})
    style = (module.default_indent, module.default_newline)
    groups = _split(statement, nodes, state, children)
    if groups is None:
        return False
    work = [((), statement, start, groups)]
    placed: dict = {}
    while work:
        chain, owner, line, groups = work.pop()
        header_lines = state.get("header", owner, lambda: _header_lines(module, owner))
        if header_lines is None:
            return False
        line += header_lines
        block = owner.body.body
        at = 0
        for child_index in sorted(groups):
            for k in range(at, child_index):
                line += lines_of(module, block[k], state)
            at = child_index
            child, part = block[child_index], groups[child_index]
            anchor_line = line + lead_lines(child)
            inner = _split(child, part, state, children) if _block(child) and len(chain) + 1 < _DEPTH else None
            if inner:
                work.append(((*chain, owner), child, anchor_line, inner))
                continue
            where = _render(module, (*chain, owner), child, style, state)
            shift = anchor_line - where[_anchor(child)].start.line
            for node in part:
                code_range = where.get(node)
                if code_range is None:
                    return False
                placed[node] = CodeRange(CodePosition(code_range.start.line + shift, code_range.start.column),
                                         CodePosition(code_range.end.line + shift, code_range.end.column))
    found.update(placed)
    memo[KEY] = state.new
    return True


def _split(owner: cst.CSTNode, nodes: list, state: NodeMemo, children: Children) -> dict | None:
    """``nodes`` grouped by the index of the statement of ``owner``'s indented body that holds
    each; ``None`` when one is in no such statement."""
    block = owner.body.body
    groups: dict[int, list] = {}
    sets = None
    for node in nodes:
        if sets is None:  # the kept sets first: the statements an edit made are walked only if needed
            sets = [state.peek("ids", child) for child in block]
        where = next((k for k, ids in enumerate(sets) if ids is not None and id(node) in ids), None)
        if where is None:
            for k, child in enumerate(block):
                if sets[k] is None:
                    sets[k] = state.get("ids", child, lambda child=child: _ids(child, children))
                    if id(node) in sets[k]:
                        where = k
                        break
        if where is None:
            return None
        groups.setdefault(where, []).append(node)
    return groups


def stub_lines(module: cst.Module, owner: cst.CSTNode) -> int:
    """Lines of ``owner`` (a compound statement with an indented body) before the first
    statement of its body, its comments and decorators included (rendered with a one-line
    body, no block footer and no ``else``)."""
    stub = owner.with_changes(body=owner.body.with_changes(body=[_PASS], footer=()))
    if hasattr(stub, "orelse"):
        stub = stub.with_changes(orelse=None)
    return module.code_for_node(stub).count("\n") - 1


def _header_lines(module: cst.Module, owner: cst.CSTNode) -> int | None:
    """Lines from ``owner``'s anchor to the first line of the first statement of its body."""
    count = stub_lines(module, owner) - lead_lines(owner)
    return count if count >= 1 else None


def lines_of(module: cst.Module, node: cst.CSTNode, state: NodeMemo) -> int:
    """How many lines ``node`` (a statement of an indented body) spans, its comments included:
    for a block, its header's plus its statements' (each counted once per node, so an edit
    inside a long method renders only the statements it changed) plus its footer's, plus its
    ``elif``'s or ``else``'s counted the same way; else its rendering's."""

    def make() -> int:
        if _block(node):
            count = _clause_lines(module, node, state)
            orelse = getattr(node, "orelse", None)
            if orelse is None:
                return count
            if orelse.__class__ is cst.If:  # elif: rendered as an ``if`` of the same lines
                return count + lines_of(module, orelse, state)
            if orelse.__class__ is cst.Else and isinstance(orelse.body, cst.IndentedBlock):
                return count + _clause_lines(module, orelse, state)
        return module.code_for_node(node).count("\n")

    return state.get("lines", node, make)


def _clause_lines(module: cst.Module, owner: cst.CSTNode, state: NodeMemo) -> int:
    """Lines of ``owner`` (a block or an ``else`` clause with an indented body) without its
    own ``elif``/``else``: its header's, its statements', its footer's."""
    inner = sum(lines_of(module, child, state) for child in owner.body.body)
    return stub_lines(module, owner) + inner + len(owner.body.footer)


def _render(module: cst.Module, chain: tuple, child: cst.CSTNode, style: tuple, state: NodeMemo) -> dict:
    """Positions of the nodes of ``child`` rendered in a stand-in of the blocks ``chain`` that
    enclose it (their headers and indentation only); kept while the node and the indentation
    of those blocks are the same."""
    indents = (style, *(owner.body.indent for owner in chain))

    def make():
        wrapped = child
        for owner in reversed(chain):
            wrapped = owner.with_changes(body=owner.body.with_changes(body=[wrapped], footer=()))
            if hasattr(wrapped, "orelse"):
                wrapped = wrapped.with_changes(orelse=None)
        single = module.with_changes(body=[wrapped], header=(), footer=())
        return indents, MetadataWrapper(single, unsafe_skip_copy=True).resolve(PositionProvider)

    kept = state.get("render", child, make)
    if kept[0] != indents:
        kept = make()
        state.new[("render", id(child))] = (child, kept)
    return kept[1]
