"""The names a ``match`` statement's ``case`` pattern captures, and what each captures.

Used by :class:`devlint.dataflow.DeviceFlow` so that ``match batch: case {"x": x, "y": y}:``
binds ``x`` and ``y`` to items of the batch (issue 25), as ``x, y = batch`` does. Grammar:
https://docs.python.org/3/reference/compound_stmts.html#the-match-statement
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

_STRUCTURED = (cst.MatchList, cst.MatchTuple, cst.MatchMapping, cst.MatchClass)


def captures(pattern: cst.MatchPattern, subject: object, items: Callable[[object], object]) -> list[tuple[cst.Name, object]]:
    """``(name, value)`` for every name ``pattern`` binds when matched against ``subject``:
    the subject itself for ``case x`` and ``... as x``, ``items(subject)`` for a name inside a
    mapping, sequence or class pattern, ``None`` (unknown) for ``*rest``/``**rest`` and for the
    names of an ``|`` alternative. ``subject``/``items`` are opaque to this function (the
    dataflow's kinds)."""
    out: list[tuple[cst.Name, object]] = []
    t = pattern.__class__
    if t is cst.MatchAs:
        if pattern.pattern is not None:
            out += captures(pattern.pattern, subject, items)
        if pattern.name is not None:
            out.append((pattern.name, subject))
    elif t is cst.MatchOr:
        for element in pattern.patterns:
            out += captures(element.pattern, None, items)
    elif t in _STRUCTURED:
        inner = items(subject)
        if t is cst.MatchMapping:
            elements = pattern.elements
            if pattern.rest is not None:
                out.append((pattern.rest, None))
        else:
            elements = pattern.patterns if t is not cst.MatchClass else (*pattern.patterns, *pattern.kwds)
        for element in elements:
            if element.__class__ is cst.MatchStar:
                if element.name is not None:
                    out.append((element.name, None))
                continue
            out += captures(element.value if element.__class__ is cst.MatchSequenceElement else element.pattern, inner, items)
    return out
