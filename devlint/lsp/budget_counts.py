"""The memory budget's token counts of an editor buffer, counted again only around an edit.

The language server asks :func:`devlint.memory_budget.over_budget` after every keystroke (the
decision ``devlint check`` takes: a text over the budget is linted as the CLI lints it).
:func:`devlint.memory_budget.counts` of a piece costs a pass over its whole text (11 ms for the
250 KB of transformers' ``trainer.py``, one piece). :class:`PieceCounts` keeps, for the last
piece it counted, the counts of chunks of about 4 KB, cut at line starts where the count of the
whole equals the sum of its parts:

* ``counts`` replaces each comment and string literal by one token (its regular expression
  ``memory_budget._LITERAL``, searched left to right); a chunk boundary lies outside every
  match of that search over the whole piece, and the character there is no ``#`` or quote (a
  literal starting there would be judged an f-string or not by the two characters before it);
* the character before a boundary is a newline (a space to ``counts``): no word runs across it;
* the tokens' bracket depths add up: the sum over the tokens of the pairs around each is, when
  the brackets all pair up, the sum of the closing brackets' places minus the opening ones'
  minus the pairs, and a chunk's places move by the tokens before it (when they do not pair
  up, the whole piece is counted as ``counts`` counts it).

For a new piece the chunks wholly before the edit are kept, those wholly after it are kept
where the search of the new piece, run from the last kept boundary, passes their first
boundary outside any literal (it then goes on as in the old piece), and the chunk between is
counted. One thing can make the kept part before the edit wrong: a triple-quoted string that
never closes (the search tried it and took two quotes as an empty string, ``''`` before a
third ``'``): an edit after it may close it. A piece holding one is counted whole. The counts
equal :func:`devlint.memory_budget.counts` every time (tests/test_budget_counts.py).
"""

from __future__ import annotations

from .. import memory_budget
from ..incremental import common_prefix, common_suffix

#: characters a chunk holds at least (then up to the next line start that may be a boundary)
CHUNK_CHARS = 4096
_NO_START = frozenset("#'\"")


def _parts(chunk: str) -> tuple[int, int, int, int, int]:
    """(tokens, opening brackets, closing brackets, sum of the opening ones' places, of the
    closing ones') of ``chunk`` as :func:`devlint.memory_budget.counts` sees it."""
    classes = memory_budget._LITERAL.sub(memory_budget._literal, chunk).encode("utf-8", "surrogatepass").translate(
        memory_budget._CLASSES)
    while b"aa" in classes:
        classes = classes.replace(b"aa", b"a")
    data = classes.replace(b" ", b"")
    places = memory_budget._places
    return len(data), data.count(b"("), data.count(b")"), places(data, b"("), places(data, b")")


def _unclosed(match) -> bool:
    """Is this match the two quotes the search took after a triple quote it could not close?"""
    text = match.group()
    return len(text) == 2 and text[0] == text[1] and match.string[match.end():match.end() + 1] == text[0]


class PieceCounts:
    """Counts of the last piece, per chunk (see the module docstring); called as
    :func:`devlint.memory_budget.counts`. Not thread safe: one document, one lint at a time."""

    def __init__(self) -> None:
        self.piece: str | None = None
        #: chunk boundaries in ``piece`` (the first 0, the last its length) and each chunk's parts
        self.bounds: list[int] = []
        self.parts: list[tuple[int, int, int, int, int]] = []
        #: the piece holds a triple-quoted string that never closes: count the next one whole
        self.unclosed = True
        #: characters counted by the last call
        self.counted = 0

    def __call__(self, piece: str) -> tuple[int, int]:
        if self.piece != piece:
            if self.piece is None or self.unclosed or not self._update(piece):
                self._full(piece)
            self.piece = piece
        return self._total(piece)

    def _total(self, piece: str) -> tuple[int, int]:
        tokens = opens = closes = at_opens = at_closes = 0
        for count, o, c, po, pc in self.parts:
            at_opens += po + tokens * o
            at_closes += pc + tokens * c
            opens, closes, tokens = opens + o, closes + c, tokens + count
        if not opens:
            return tokens, 0
        if opens != closes:  # counted as counts() counts it (its own cache keeps the last few)
            return memory_budget.counts(piece)
        return tokens, max(0, at_closes - at_opens - opens)

    def _full(self, piece: str) -> None:
        bounds, unclosed = [0], False
        spans = memory_budget._LITERAL.finditer(piece)
        span = next(spans, None)
        at = 0
        while True:
            at = piece.find("\n", at + CHUNK_CHARS) + 1
            while at:  # the next line start outside every literal, at no '#' or quote
                while span is not None and span.end() <= at:
                    unclosed = unclosed or _unclosed(span)
                    span = next(spans, None)
                if span is not None and span.start() < at:
                    at = piece.find("\n", span.end()) + 1
                elif at < len(piece) and piece[at] in _NO_START:
                    at = piece.find("\n", at) + 1
                else:
                    break
            if not at or at >= len(piece):
                break
            bounds.append(at)
        while span is not None:
            unclosed = unclosed or _unclosed(span)
            span = next(spans, None)
        bounds.append(len(piece))
        self.bounds, self.unclosed, self.counted = bounds, unclosed, len(piece)
        self.parts = [_parts(piece[a:b]) for a, b in zip(bounds, bounds[1:])]

    def _update(self, piece: str) -> bool:
        old, bounds = self.piece, self.bounds
        top = common_prefix(old, piece)
        bottom = common_suffix(old, piece, min(len(old), len(piece)) - top)
        shift = len(piece) - len(old)
        # the last boundary whose character and the one before lie in the common prefix
        k = max(i for i, b in enumerate(bounds) if b < top or b == 0)
        start = bounds[k]
        # the first boundary after the edit that the new search passes outside any literal
        later = [i for i, b in enumerate(bounds) if b - 1 >= len(old) - bottom and b < len(old)]
        unclosed, end, j = False, len(piece), len(bounds) - 1
        pending = iter(later)
        i = next(pending, None)
        for match in memory_budget._LITERAL.finditer(piece, start):
            if i is not None and bounds[i] + shift <= match.start():
                break  # every match before it ended at or before it: the search passes it outside
            unclosed = unclosed or _unclosed(match)
            while i is not None and bounds[i] + shift < match.end():  # inside this match
                i = next(pending, None)
        if i is not None:
            end, j = bounds[i] + shift, i
        if unclosed:
            return False
        region = _parts(piece[start:end])
        self.bounds = [*bounds[:k + 1], *(b + shift for b in bounds[j:])]
        self.parts = [*self.parts[:k], region, *self.parts[j:]]
        self.counted = end - start
        return True
