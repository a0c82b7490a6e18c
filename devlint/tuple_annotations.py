"""The fields of a parameter annotated as a tuple that its annotation says are no tensors.

``def step_(self, gym_batch: Tuple[torch.Tensor, float, bool, Dict])``: unpacking
``obs, reward, done, info = gym_batch`` gives one tensor and three values that are no items of a
batch on any device (a reward, a flag, a dict of diagnostics); DEV111 takes only the fields
that may hold a tensor for the batch's items.
"""

from __future__ import annotations

import re

import libcst as cst

#: ``Tuple[...]``/``tuple[...]`` (``typing.`` or not) and what it holds
_TUPLE = re.compile(r"^(?:typing\.)?[Tt]uple\[(.*)\]$", re.DOTALL)
#: a field annotation that holds no tensor: a number, a flag, text (or an Optional of one)
_SCALAR_FIELD = re.compile(r"^(?:(?:typing\.)?Optional\[)?(?:int|float|bool|str|complex)\]?$")


def _fields(text: str) -> list[str]:
    """The top-level comma-separated parts of ``text`` (``Tensor, Dict[str, int]`` -> 2)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def scalar_fields(function: cst.CSTNode | None, name: str, count: int) -> frozenset[int]:
    """Positions (0-based) of the fields that are no tensors when the parameter ``name`` of
    ``function`` (a :class:`libcst.FunctionDef`) is unpacked into ``count`` targets, read from an
    annotation ``Tuple[T0, T1, ...]`` of exactly ``count`` fields; empty when there is none."""
    if not isinstance(function, cst.FunctionDef):
        return frozenset()
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value != name:
            continue
        if param.annotation is None:
            return frozenset()
        match = _TUPLE.match(cst.Module([]).code_for_node(param.annotation.annotation).strip())
        if match is None:
            return frozenset()
        fields = _fields(match.group(1))
        if len(fields) != count or "..." in fields:
            return frozenset()
        return frozenset(i for i, f in enumerate(fields) if _SCALAR_FIELD.match(f))
    return frozenset()
