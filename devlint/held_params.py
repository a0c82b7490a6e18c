"""Parameters a function only holds: it fills them, hands them on as options or tests them for ``None``.

DEV111 reads a method of this file handed an item of a partly moved batch as computing with it.
A parameter the method never computes with is no such input: an output container it fills
(``out.set(key, value)``, ``out.empty()``, ``return out``), a configuration it hands on as an option
(``generate(..., generation_config=cfg)``, ``kwargs["generation_config"] = cfg``: the keyword or
key names a configuration; ``model(input_ids=ids)`` computes with ``ids``), a value it
only tests (``if cfg is not None``, ``isinstance(out, dict)``). :func:`only_held` reads the body
once with a libcst visitor.
"""

from __future__ import annotations

import libcst as cst

from .flow_tables import _CONFIG_NAME

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
            # an option by name (generation_config=cfg), not a data keyword (input_ids=ids: computed with)
            option = arg.keyword is not None and not arg.star and _CONFIG_NAME.search(arg.keyword.value)
            if self._is(arg.value) and (looking or option):
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
        if self._is(node.value) and node.targets and all(_option_key(t.target) for t in node.targets):
            self.held += 1  # kwargs["generation_config"] = cfg (not inputs["input_ids"] = ids)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested def has its own names

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _option_key(target: cst.BaseAssignTargetExpression) -> bool:
    """Is ``target`` a subscript by a string naming an option (``kwargs["generation_config"]``)?"""
    if target.__class__ is not cst.Subscript or len(target.slice) != 1:
        return False
    key = target.slice[0].slice
    index = key.value if key.__class__ is cst.Index else None
    return index.__class__ is cst.SimpleString and bool(_CONFIG_NAME.search(index.evaluated_value))


def only_held(function: cst.FunctionDef, name: str) -> bool:
    """Does ``function`` use its parameter ``name`` at all, and only to hold it (see the module
    docstring)? ``False`` for a parameter it reads in any other way (``x + 1``, ``model(x)``,
    ``x.float()``, ``y = x``)."""
    uses = _Uses(name)
    function.body.visit(uses)
    return uses.uses > 0 and uses.uses == uses.held
