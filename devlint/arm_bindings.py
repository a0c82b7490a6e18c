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


class _Bindings(cst.CSTVisitor):
    """How many times each name is bound in a block of one scope (nested functions, classes,
    lambdas and comprehensions are other scopes: only a ``def``'s or ``class``'s own name,
    and a walrus, which binds in the enclosing function, count)."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()

    def _targets(self, target: cst.BaseExpression) -> None:
        if target.__class__ is cst.Name:
            self.count[target.value] += 1
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._targets(element.value)
        elif target.__class__ is cst.StarredElement:
            self._targets(target.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:  # with ... as x, except E as x, import m as x
        self._targets(node.name)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        if node.asname is None:
            name = node.name
            while name.__class__ is cst.Attribute:
                name = name.value
            self._targets(name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target)

    def visit_Del(self, node: cst.Del) -> None:
        self._targets(node.target)

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self._targets(node.name)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self._targets(node.name)

    def visit_MatchMapping(self, node: cst.MatchMapping) -> None:
        if node.rest is not None:
            self._targets(node.rest)

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self.count[item.name.value] += _ANYWHERE

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            self.count[item.name.value] += _ANYWHERE

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.count[node.name.value] += 1
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.count[node.name.value] += 1
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        self._walrus_only(node)
        return False

    def _walrus_only(self, node: cst.CSTNode) -> None:
        """A comprehension's own targets bind in its scope; a walrus in it binds outside."""
        stack = [node]
        while stack:
            current = stack.pop()
            if current.__class__ is cst.NamedExpr:
                self._targets(current.target)
            stack.extend(current.children)


def bindings(block: cst.CSTNode) -> Counter:
    """How many times each name is bound in ``block`` (a function's body, an arm of an ``if``),
    in the block's own scope; a name declared ``global``/``nonlocal`` counts as bound
    everywhere. A pure function of the immutable node."""
    seen = _Bindings()
    block.visit(seen)
    return seen.count


def bound_only_in(function_body: Counter, arm: Counter) -> frozenset[str]:
    """The names ``arm`` binds that no other statement of the function binds: every binding
    of them counted in ``function_body`` (the function's parameters are not in it: the caller
    only asks of names unbound before the ``if``) lies in ``arm``."""
    return frozenset(name for name, n in arm.items() if n and function_body.get(name) == n)
