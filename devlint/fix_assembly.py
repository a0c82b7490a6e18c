"""A rule's autofix, stated on nodes (:class:`devlint.rule.NodeFix`), made into text edits at
line and column positions (:class:`devlint.finding.Fix`), each checked against the text."""

from __future__ import annotations

import bisect

import libcst as cst

from . import source as source_text
from .finding import Edit, Fix


def assemble(pending, positions, module: cst.Module, text: str, starts: list[int]) -> Fix | None:
    """A rule's :class:`NodeFix` -> a :class:`Fix` with positions (``None`` if unplaceable).

    A replacement given as a function is called with the node's source text and the
    indentation of the line it starts on (see :class:`devlint.rule.NodeFix`). A node's source
    (libcst's code generation, which a rule's replacement is made from) includes the node's
    own parentheses while its position leaves them out: the edit is widened over them. Each
    edit carries that source, checked against the text at its positions before it is applied
    (:mod:`devlint.fix`). ``starts`` are the offsets of ``text``'s lines."""
    edits = []
    for node, replacement in pending.replacements:
        where = positions.get(node)
        if where is None:
            return None
        original = module.code_for_node(node)
        try:
            begin = source_text.offset(starts, text, where.start.line, where.start.column)
            stop = source_text.offset(starts, text, where.end.line, where.end.column)
        except ValueError:
            return None
        lpar, rpar = getattr(node, "lpar", ()), getattr(node, "rpar", ())
        if isinstance(lpar, (list, tuple)) and isinstance(rpar, (list, tuple)):  # With.lpar may be a sentinel
            begin -= sum(len(module.code_for_node(p)) for p in lpar)
            stop += sum(len(module.code_for_node(p)) for p in rpar)
        if begin < 0:
            return None
        if callable(replacement):
            # code_for_node does not know the indentation of an enclosing block, so a compound
            # statement is checked by its first line and handed over as the file's own text
            # (its source opens with its leading blank and comment lines, which its position skips)
            segment = text[begin:stop]
            first = segment.split("\n", 1)[0]
            skip = len(getattr(node, "leading_lines", ()) or ())
            parts = original.split("\n", skip + 1)
            if skip >= len(parts) or first != parts[skip][: len(first)]:
                return None
            original = segment
        elif text[begin:stop] != original:
            return None
        if callable(replacement):
            line_start = starts[bisect.bisect_right(starts, begin) - 1]
            first = text[line_start:begin]
            replacement = replacement(original, first[: len(first) - len(first.lstrip(" \t"))])
            if replacement is None:
                return None
        edits.append(Edit(*_position(starts, begin), *_position(starts, stop), replacement, original))
    return Fix(pending.description, tuple(edits), pending.safe)


def _position(starts: list[int], at: int) -> tuple[int, int]:
    """(1-based line, 0-based column) of offset ``at``."""
    line = bisect.bisect_right(starts, at)
    return line, at - starts[line - 1]
