"""``# noqa``'s line map for an editor buffer, re-tokenized only around what changed.

:func:`devlint.noqa.apply` searches the text of the token group a finding is on (the lines a
multi-line string or a backslash continuation joins, cut at every ``NL``/``NEWLINE`` token:
``devlint.noqa._line_map``), which costs one tokenization of the whole text: 80 ms for a
5,000-line file, on every keystroke. :class:`LineGroups` keeps that map per document with, for
every line that starts where the tokenizer is at bracket depth 0 and outside any string (after
an ``NL`` or ``NEWLINE`` at depth 0), its stack of indentation columns. For a new text it
restarts the tokenizer at the last such line before the first changed line (a stand-in of
``pass`` lines rebuilds the indentation stack, so dedents are judged as in the whole text) and
stops at the first such line past the change where the old text had one with the same stack:
from there on the tokens, and so the groups, are the old ones moved by the lines added.
The map equals ``_line_map(text)`` every time (tests/test_server_incremental.py); a text that
does not tokenize gives the empty map, as there.
"""

from __future__ import annotations

import tokenize

from ..source import generate_tokens, split_lines

_TABSIZE = 8  # as the tokenize module expands tabs in indentation


def _column(indent: str) -> int:
    """The indentation column of ``indent`` as the tokenize module counts it."""
    column = 0
    for char in indent:
        if char == " ":
            column += 1
        elif char == "\t":
            column = (column // _TABSIZE + 1) * _TABSIZE
        elif char == "\f":
            column = 0
    return column


class LineGroups:
    """The ``# noqa`` line map of a document's last text (see the module docstring)."""

    def __init__(self) -> None:
        self.lines: list[str] | None = None
        #: per 0-based line: the joined text of its token group, or None
        self.groups: list[str | None] = []
        #: per 0-based line: the indentation stack where a clean restart can begin, or None
        self.clean: list[tuple[int, ...] | None] = []
        #: how many lines the last update tokenized (a full tokenization: all of them)
        self.tokenized = 0

    def mapping(self, text: str) -> "_Map":
        """The line map of ``text``: ``.get(line)`` gives the joined group of a 1-based line,
        or ``None`` (no group, or a text that does not tokenize)."""
        lines = split_lines(text, keepends=True)
        if self.lines is None or not self._update(lines):
            self._full(lines)
        return _Map(self.groups)

    def _full(self, lines: list[str]) -> None:
        found = self._tokenize(lines, 0, (0,), None)
        if found is None:
            self.lines, self.groups, self.clean = None, [None] * len(lines), []
            return
        self.lines, (self.groups, self.clean) = lines, found[:2]
        self.tokenized = len(lines)

    def _update(self, lines: list[str]) -> bool:
        old = self.lines
        if lines == old:
            return True
        limit = min(len(old), len(lines))
        top = 0
        while top < limit and old[top] == lines[top]:
            top += 1
        bottom = 0
        while bottom < limit - top and old[-1 - bottom] == lines[-1 - bottom]:
            bottom += 1
        restart = top
        while restart > 0 and self.clean[restart] is None:
            restart -= 1
        if restart == 0:
            return False
        delta = len(lines) - len(old)
        found = self._tokenize(lines, restart, self.clean[restart], (len(lines) - bottom, delta))
        if found is None:
            return False
        groups, clean, stop = found
        if stop == len(lines):  # tokenized to the end: nothing of the old map is left
            self.groups, self.clean = [*self.groups[:restart], *groups], [*self.clean[:restart], *clean]
        else:
            self.groups = [*self.groups[:restart], *groups, *self.groups[stop - delta:]]
            self.clean = [*self.clean[:restart], *clean[:stop - restart], *self.clean[stop - delta:]]
        self.lines = lines
        self.tokenized = stop - restart
        return True

    def _tokenize(self, lines: list[str], start: int, stack: tuple[int, ...], resync):
        """Groups and clean-restart stacks of ``lines[start:stop]``, tokenizing from line
        ``start`` (0-based) with the indentation ``stack``; ``stop`` is the end of the text or,
        with ``resync`` = (first unchanged line at the end, lines added), the first clean line
        at or past that line whose old counterpart was clean with the same stack. ``None``
        when the tokenizer fails (the text does not tokenize)."""
        stand_in = [" " * column + "pass\n" for column in stack[1:]]
        shift = start - len(stand_in)  # 0-based line in ``lines`` = token line - 1 + shift
        text = "".join([*stand_in, *lines[start:]])
        count = len(lines) - start
        groups: list[str | None] = [None] * count
        clean: list[tuple[int, ...] | None] = [None] * (count + 1)
        clean[0] = stack
        indents = [0]
        depth = 0
        first, last = len(lines) + len(stand_in) + 2, -1
        stop = len(lines)
        try:
            for tok in generate_tokens(text):
                kind = tok.type
                if kind == tokenize.INDENT:
                    indents.append(_column(tok.string))
                elif kind == tokenize.DEDENT:
                    indents.pop()
                    continue
                elif kind == tokenize.ENDMARKER:
                    continue
                elif kind == tokenize.OP:
                    if tok.string in "([{":
                        depth += 1
                    elif tok.string in ")]}":
                        depth -= 1  # below 0 after a stray bracket, as the tokenizer counts
                first, last = min(first, tok.start[0]), max(last, tok.end[0])
                if kind not in (tokenize.NL, tokenize.NEWLINE):
                    continue
                a, b = first - 1 + shift, last - 1 + shift  # 0-based lines of ``lines``
                if b >= start:
                    joined = "".join(lines[max(a, start):b + 1])
                    if a < start:  # a group reaching into the stand-in: never (it ends each line)
                        return None
                    for k in range(a, b + 1):
                        groups[k - start] = joined
                first, last = len(lines) + len(stand_in) + 2, -1
                nxt = b + 1  # the line after the group, 0-based
                if depth or nxt < start:
                    continue
                here = tuple(indents)
                clean[nxt - start] = here
                if resync is not None and nxt >= resync[0] and nxt < len(lines):
                    old = nxt - resync[1]
                    if 0 < old < len(self.clean) and self.clean[old] == here:
                        stop = nxt
                        break
        except (tokenize.TokenError, SyntaxError, ValueError):
            return None
        return groups[:stop - start], clean, stop


class _Map:
    """1-based line -> joined group text (``dict.get``-like) over the per-line list."""

    __slots__ = ("groups",)

    def __init__(self, groups: list) -> None:
        self.groups = groups

    def get(self, line: int):
        return self.groups[line - 1] if 0 < line <= len(self.groups) else None
