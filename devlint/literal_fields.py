"""Fields of a loader's batches that are literals the code added, not tensors (DEV111).

``loader = [sub_data + ({},) for sub_data in loader]`` rebuilds a loader as a list of its
batches, each extended with an empty dict (a per-batch ``state``). Iterating it with ``for
data, ..., state in loader`` binds ``state`` to that literal: no item of the batch, so it is
never a tensor left behind.
"""

from __future__ import annotations

import libcst as cst

_CONSTANTS = (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)


def _literal(expr: cst.BaseExpression) -> bool:
    """A constant, ``None``/``True``/``False``, or a display of them (``{}``, ``[]``, ``(0, "")``)."""
    if isinstance(expr, _CONSTANTS):
        return True
    if expr.__class__ is cst.Name:
        return expr.value in ("None", "True", "False")
    if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        return all(e.__class__ is cst.Element and _literal(e.value) for e in expr.elements)
    if expr.__class__ is cst.Dict:
        return all(e.__class__ is cst.DictElement and _literal(e.key) and _literal(e.value) for e in expr.elements)
    return False


def literal_fields(value: cst.BaseExpression) -> tuple[int, frozenset[int]] | None:
    """For a comprehension of batches (``[b + ({},) for b in loader]``, ``[(x, y, None) for ...]``):
    ``(n, offsets)`` where the elements at ``offsets`` (negative, from the end) are literals;
    ``n`` is the tuple's length when the whole tuple is written out, else 0 (only its tail is
    known). ``None`` when no field is a literal."""
    if not isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return None
    elt = value.elt
    if elt.__class__ is cst.Tuple:
        n, shown = len(elt.elements), elt.elements
    elif elt.__class__ is cst.BinaryOperation and elt.operator.__class__ is cst.Add and elt.right.__class__ is cst.Tuple:
        n, shown = 0, elt.right.elements
    else:
        return None
    if any(e.__class__ is not cst.Element for e in shown):
        return None
    offsets = frozenset(i - len(shown) for i, e in enumerate(shown) if _literal(e.value))
    return (n, offsets) if offsets else None


def literal_targets(target: cst.BaseExpression, fields: tuple[int, frozenset[int]]) -> list[cst.BaseExpression]:
    """The targets of ``for <target> in <loader>`` that the literal fields land on (a tuple
    target of the written-out length, or any tuple target for a tail)."""
    n, offsets = fields
    if target.__class__ not in (cst.Tuple, cst.List) or any(e.__class__ is cst.StarredElement for e in target.elements):
        return []
    elements = target.elements
    if n and len(elements) != n:
        return []
    return [elements[len(elements) + i].value for i in sorted(offsets) if len(elements) + i >= 0]
