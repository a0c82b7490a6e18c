"""The single traversal of a parsed module, and the hook tables it calls.

Every participant (the guard tracking, the analyses, the rules) declares ``visit_<Node>`` and
``leave_<Node>`` methods; :func:`tables` gathers them by node type and :func:`walk` visits
each node once, in source order, calling them, on an explicit stack (no node is rebuilt, no
recursion limit is hit on a 3,000-term expression). :func:`children` yields what the walk
enters below a node (positions are found by the same rule of what is walked)."""

from __future__ import annotations

import dataclasses
from typing import Iterable

import libcst as cst

from .context import Context
from .rule import Participant


_SKIP_FIELDS = {
    "lpar", "rpar", "leading_lines", "lines_after_decorators", "header", "footer", "comma",
    "semicolon", "equal", "colon", "dot", "lbracket", "rbracket", "lbrace", "rbrace",
    "operator", "asynchronous", "star", "star_tok", "decorators", "newline", "trailing_whitespace",
}
_ORDER = {
    cst.FunctionDef: ("params", "returns", "body"),
    cst.ClassDef: ("bases", "keywords", "body"),
}
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(kind: type) -> tuple[str, ...]:
    names = _ORDER.get(kind)
    if names is None:
        names = tuple(
            f.name for f in dataclasses.fields(kind)
            if f.name not in _SKIP_FIELDS and not f.name.startswith("whitespace")
        )
    _FIELDS[kind] = names
    return names


def _skipped_types() -> frozenset[type]:
    """Whitespace and punctuation nodes: nothing a rule looks at lives below them."""
    import libcst._nodes.whitespace as whitespace

    found = {v for v in vars(whitespace).values() if isinstance(v, type) and issubclass(v, cst.CSTNode)}
    found |= {cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen, cst.RightParen,
              cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace}
    return frozenset(found)


_SKIP_TYPES = _skipped_types()
_WALKED: dict[type, bool] = {type(None): False, str: False}


def _walkable(kind: type) -> bool:
    """Is a child of this exact type walked? (A node, and no whitespace or punctuation.)"""
    ok = _WALKED[kind] = isinstance(kind, type) and issubclass(kind, cst.CSTNode) and kind not in _SKIP_TYPES
    return ok


def _leaf(kind: type) -> bool:
    """Does a node of this type hold no walked child (``Name``, ``Integer``, ``SimpleString``,
    ``Pass``...: every walked field a string)? One with no hook is then never pushed."""
    types = {f.name: f.type for f in dataclasses.fields(kind)}
    return all(types[name] in (str, bool) for name in _FIELDS.get(kind) or _fields(kind))


#: ``walk``'s mark of a walked type (``Name``) whose nodes are pushed only if their value is wanted.
_BY_NAME = 2


def _wanted_names(visit: dict, leave: dict) -> set[str] | None:
    """The names some ``visit_Name`` needs, when every participant with one says which
    (:attr:`devlint.rule.Participant.wanted_names`); ``None``: every name is walked."""
    if cst.Name in leave or cst.Name not in visit:
        return None
    wanted: set[str] = set()
    for hook in visit[cst.Name]:
        names = getattr(hook.__self__, "wanted_names", None)
        if names is None:
            return None
        wanted |= names
    return wanted


def walk(module: cst.Module, visit: dict, leave: dict, ctx: Context, at: dict | None = None) -> None:
    """Visit every node once, in source order, without recursion; decorators are visited
    before their function or class is entered. A node gets a leave step only if some
    participant has a ``leave_`` hook for its type or it opens a guard. Leaf nodes that no
    hook asks for (a third of all nodes are names) are not pushed at all. ``at`` maps the
    ``id`` of a statement to a callable given the walk's stack when the walk is about to enter
    it; one that returns true has taken the statement (and what it popped) off the walk
    (:mod:`devlint.resume`)."""
    marks = ctx._guard_nodes
    fields = _FIELDS
    walked = dict(_WALKED)  # exact type -> is it walked? (no ABC ``isinstance`` per child)
    for kind in list(walked):
        if walked[kind] and kind not in visit and kind not in leave and _leaf(kind):
            walked[kind] = False

    def walkable(kind: type) -> bool:
        ok = walked[kind] = _walkable(kind) and (kind in visit or kind in leave or not _leaf(kind))
        return ok

    for hook in visit.get(cst.Module, ()):
        hook(module)
    wanted = _wanted_names(visit, leave)
    if wanted is not None:
        walked[cst.Name] = _BY_NAME
    stack: list[tuple[cst.CSTNode, int]] = []
    pop, push = stack.pop, stack.append
    for index, statement in enumerate(module.body):
        ctx.statement_index = index
        push((statement, 0))
        while stack:
            node, state = pop()
            if at is not None and state == 0 and id(node) in at and at[id(node)](stack):
                continue
            kind = node.__class__
            if state == 2:
                for hook in leave.get(kind, ()):
                    hook(node)
                if id(node) in marks:
                    ctx.guard_depth -= 1
                continue
            if state == 0 and (kind is cst.FunctionDef or kind is cst.ClassDef) and node.decorators:
                push((node, 1))
                for decorator in reversed(node.decorators):
                    push((decorator.decorator, 0))
                continue
            marked = id(node) in marks
            if marked:
                ctx.guard_depth += 1
            hooks = visit.get(kind)
            if hooks:
                for hook in hooks:
                    hook(node)
            if marked or kind in leave:
                push((node, 2))
            names = fields.get(kind) or _fields(kind)
            for name in reversed(names):
                value = getattr(node, name)
                cls = value.__class__
                if cls is tuple or cls is list:
                    for item in reversed(value):
                        ok = walked.get(item.__class__)
                        if ok or (ok is None and walkable(item.__class__)):
                            if ok != _BY_NAME or item.value in wanted:
                                push((item, 0))
                else:
                    ok = walked.get(cls)
                    if ok or (ok is None and walkable(cls)):
                        if ok != _BY_NAME or value.value in wanted:
                            push((value, 0))
    for hook in leave.get(cst.Module, ()):
        hook(module)


_HOOKS: dict[type, list[tuple[bool, type, str]]] = {}


def _hooks(cls: type) -> list[tuple[bool, type, str]]:
    """(is a visit hook, node type, method name) of each ``visit_<Node>``/``leave_<Node>`` of a
    participant class, in ``dir`` order; found once per class, not once per file."""
    found = _HOOKS.get(cls)
    if found is None:
        found = []
        for attr in dir(cls):
            prefix, _, node_name = attr.partition("_")
            if prefix not in ("visit", "leave") or not node_name:
                continue
            kind = getattr(cst, node_name, None)
            if isinstance(kind, type):
                found.append((prefix == "visit", kind, attr))
        _HOOKS[cls] = found
    return found


def tables(participants: Iterable[Participant]) -> tuple[dict, dict]:
    visit: dict[type, list] = {}
    leave: dict[type, list] = {}
    for participant in participants:
        for is_visit, kind, attr in _hooks(type(participant)):
            (visit if is_visit else leave).setdefault(kind, []).append(getattr(participant, attr))
    return visit, leave


def children(node: cst.CSTNode):
    """The children of ``node`` that the walk visits (decorators included), as :func:`devlint.positions._locate` walks them."""
    kind = node.__class__
    if kind is cst.FunctionDef or kind is cst.ClassDef:
        yield from node.decorators
    walked = _WALKED
    for name in _FIELDS.get(kind) or _fields(kind):
        value = getattr(node, name)
        cls = value.__class__
        if cls is tuple or cls is list:
            for item in value:
                ok = walked.get(item.__class__)
                if ok or (ok is None and _walkable(item.__class__)):
                    yield item
        else:
            ok = walked.get(cls)
            if ok or (ok is None and _walkable(cls)):
                yield value
