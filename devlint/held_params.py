"""Parameters a function only holds: it fills them, hands them on as options or tests them for ``None``.

DEV111 reads a method of this file handed an item of a partly moved batch as computing with it.
A parameter the method never computes with is no such input: an output container it fills
(``out.set(key, value)``, ``out.empty()``, ``return out``), a configuration it hands on as an option
(``generate(..., generation_config=cfg)``, ``kwargs["generation_config"] = cfg``), a value it
only tests (``if cfg is not None``, ``isinstance(out, dict)``). :func:`only_held` reads the body
once with a libcst visitor.
"""

from __future__ import annotations

import libcst as cst

#: methods that store into, read from or copy a container, computing nothing with its tensors
_HOLDING = frozenset("set get empty update keys items values copy setdefault pop append extend insert select".split())
#: what a value says of itself: its size, device and kind
_META = frozenset("shape ndim device dtype batch_size is_cuda".split())
#: builtins that look at a value without computing with it
_LOOKING = frozenset({"isinstance", "len", "type", "id", "repr", "str", "bool", "getattr", "hasattr"})


class _Uses(cst.CSTVisitor):
    """Counts the uses of one name in a body, and those that only hold it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.uses = self.held = 0

    def _is(self, node: cst.BaseExpression) -> bool:
        return node.__class__ is cst.Name and node.value == self.name

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.uses += 1

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if func.__class__ is cst.Attribute and self._is(func.value) and func.attr.value in _HOLDING:
            self.held += 1  # out.set(key, value)
        looking = func.__class__ is cst.Name and func.value in _LOOKING
        for arg in node.args:
            if self._is(arg.value) and (looking or (arg.keyword is not None and not arg.star)):
                self.held += 1  # isinstance(out, dict), generate(..., generation_config=cfg)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._is(node.value) and node.attr.value in _META:
            self.held += 1  # out.ndim

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None and self._is(node.value):
            self.held += 1  # return out: handed back as it came

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if self._is(node.left) and all(
            c.operator.__class__ in (cst.Is, cst.IsNot) and c.comparator.__class__ is cst.Name and c.comparator.value == "None"
            for c in node.comparisons
        ):
            self.held += 1  # cfg is not None

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._is(node.value) and all(t.target.__class__ is cst.Subscript for t in node.targets):
            self.held += 1  # kwargs["generation_config"] = cfg

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested def has its own names

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def only_held(function: cst.FunctionDef, name: str) -> bool:
    """Does ``function`` use its parameter ``name`` at all, and only to hold it (see the module
    docstring)? ``False`` for a parameter it reads in any other way (``x + 1``, ``model(x)``,
    ``x.float()``, ``y = x``)."""
    uses = _Uses(name)
    function.body.visit(uses)
    return uses.uses > 0 and uses.uses == uses.held
