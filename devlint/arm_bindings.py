"""Names a function binds in one arm of an ``if`` and nowhere else (DEV111's join of the arms).

``if config.task == "annotation": labels = batch["labels"].to(d)`` binds ``labels`` on one arm
only. A run that skips the arm cannot read ``labels`` after the ``if`` (it is unbound there), and
no other statement of the function binds it, so every read of ``labels`` after the ``if`` (in a
loop, on any later iteration too) sees the value that arm gave it. The join then keeps that
value instead of making it unknown; the arm that moves nothing leaves an item behind.
"""

from __future__ import annotations

from collections import Counter

import libcst as cst

#: statements that make a name bound in ways the count cannot follow (another scope's binding)
_ANYWHERE = 1 << 30


def _targets(target: cst.BaseExpression, count: Counter) -> None:
    if target.__class__ is cst.Name:
        count[target.value] += 1
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            _targets(element.value, count)
    elif target.__class__ is cst.StarredElement:
        _targets(target.value, count)


#: node type -> the field holding the name(s) it binds
_BINDING_FIELD = {
    cst.AssignTarget: "target", cst.AnnAssign: "target", cst.AugAssign: "target", cst.For: "target",
    cst.AsName: "name",  # with ... as x, except E as x, import m as x
    cst.NamedExpr: "target", cst.Del: "target", cst.MatchAs: "name", cst.MatchStar: "name", cst.MatchMapping: "rest",
}


def bindings(block: cst.CSTNode) -> Counter:
    """How many times each name is bound in ``block`` (a function's body, an arm of an ``if``),
    in the block's own scope: nested functions, classes, lambdas and comprehensions are other
    scopes (only a ``def``'s or ``class``'s own name counts, and a walrus, which binds in the
    enclosing function). A name declared ``global``/``nonlocal`` counts as bound everywhere.
    A pure function of the immutable node; walks the dataclass fields itself (libcst's
    visitor was half a long file's lint)."""
    count: Counter = Counter()
    stack: list = [block]
    node_type = cst.CSTNode
    while stack:
        node = stack.pop()
        t = node.__class__
        if t is cst.Name:
            continue
        field = _BINDING_FIELD.get(t)
        if field is not None:
            value = getattr(node, field)
            if value is not None:
                _targets(value, count)
        if t is cst.ImportAlias and node.asname is None:
            name = node.name
            while name.__class__ is cst.Attribute:
                name = name.value
            _targets(name, count)
        elif t is cst.Global or t is cst.Nonlocal:
            for item in node.names:
                count[item.name.value] += _ANYWHERE
        elif t is cst.FunctionDef or t is cst.ClassDef:
            count[node.name.value] += 1
            continue
        elif t is cst.Lambda:
            continue
        elif t is cst.CompFor:
            _walrus_only(node, count)
            continue
        for name in node.__dataclass_fields__:
            value = getattr(node, name)
            if isinstance(value, node_type):
                stack.append(value)
            elif value.__class__ is tuple or value.__class__ is list:
                stack.extend(item for item in value if isinstance(item, node_type))
    return count


def _walrus_only(node: cst.CSTNode, count: Counter) -> None:
    """A comprehension's own targets bind in its scope; a walrus in it binds outside."""
    stack = [node]
    node_type = cst.CSTNode
    while stack:
        current = stack.pop()
        if current.__class__ is cst.NamedExpr:
            _targets(current.target, count)
        for name in current.__dataclass_fields__:
            value = getattr(current, name)
            if isinstance(value, node_type):
                stack.append(value)
            elif value.__class__ is tuple or value.__class__ is list:
                stack.extend(item for item in value if isinstance(item, node_type))


def bound_only_in(function_body: Counter, arm: Counter) -> frozenset[str]:
    """The names ``arm`` binds that no other statement of the function binds: every binding
    of them counted in ``function_body`` (the function's parameters are not in it: the caller
    only asks of names unbound before the ``if``) lies in ``arm``."""
    return frozenset(name for name, n in arm.items() if n and function_body.get(name) == n)


def bound_to_none(block: cst.CSTNode) -> frozenset[str]:
    """The names every binding of which in ``block`` (an arm of an ``if``) is ``name = None``
    (``else: labels = None``): the arm gives them no value at all."""
    nones: Counter = Counter()
    for statement in getattr(block, "body", ()):
        if statement.__class__ is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if small.__class__ is cst.Assign and small.value.__class__ is cst.Name and small.value.value == "None":
                for target in small.targets:
                    if target.target.__class__ is cst.Name:
                        nones[target.target.value] += 1
    if not nones:
        return frozenset()
    count = bindings(block)
    return frozenset(name for name, n in nones.items() if count.get(name) == n)
