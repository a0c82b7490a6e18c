"""The calls :meth:`devlint.project.index.View.forced_rules` looks up, found again only around an
edit.

``forced_rules`` finds the calls of imported names with one regular expression over the whole
text (a dotted name whose head an import binds, then ``(``): 70-90 ms of CPU for the 250 KB of
transformers' ``trainer.py``, on every keystroke of the language server. :class:`CallScan`
keeps, per document, the last text and every match in it (start, end, the dotted name). For a
new text with the same pattern it searches only between two *cut points* around the changed
characters and keeps the old matches before and after them (those after moved by the length
the edit added).

A cut point ``p`` is a position where the character before is a space, a tab or a newline and
the character at ``p`` an ASCII letter, digit or ``_`` (or the start or end of the text). No
match covers both ``p - 1`` and ``p``: the only part of the pattern that matches a whitespace
character is the ``\\s*`` before ``(`` (the imported names hold none, ``\\.[\\w.]*`` none), so
the character after it in a match is whitespace or ``(``, never a letter. So the matches of
the whole text are those of the text before ``p`` and those of the text from ``p`` on (the
look-behind ``(?<![\\w.])`` sees whitespace at ``p`` either way), and the same holds for the
end of the searched span. The result equals a search of the whole text every time
(tests/test_project_index.py compares them on random edits).
"""

from __future__ import annotations

import re

from ..incremental import common_prefix, common_suffix

_BEFORE = frozenset(" \t\n")
_AT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _cut(text: str, p: int) -> bool:
    return text[p - 1] in _BEFORE and text[p] in _AT


class CallScan:
    """One document's last text and the matches of the calls pattern in it (see the module
    docstring). Not thread safe: one document, one lint at a time."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.pattern: re.Pattern | None = None
        #: (start, end, group 1) of every match of ``pattern`` in ``text``, in order
        self.matches: list[tuple[int, int, str]] = []
        #: characters searched by the last call (the whole text: a full search)
        self.searched = 0

    def names(self, text: str, pattern: re.Pattern) -> list[str]:
        """Group 1 of every match of ``pattern`` (the calls pattern of ``forced_rules``) in
        ``text``, in order: what ``pattern.findall(text)`` gives."""
        old = self.text
        if old is None or pattern.pattern != self.pattern.pattern or pattern.flags != self.pattern.flags:
            self._full(text, pattern)
        elif old != text:
            self._update(old, text, pattern)
        return [m[2] for m in self.matches]

    def _full(self, text: str, pattern: re.Pattern) -> None:
        self.matches = [(m.start(), m.end(), m.group(1)) for m in pattern.finditer(text)]
        self.text, self.pattern, self.searched = text, pattern, len(text)

    def _update(self, old: str, text: str, pattern: re.Pattern) -> None:
        top = common_prefix(old, text)
        bottom = common_suffix(old, text, min(len(old), len(text)) - top)
        # the last cut point whose two characters lie in the common prefix
        p = top - 1
        while p > 0 and not _cut(text, p):
            p -= 1
        p = max(p, 0)
        # the first cut point whose two characters lie in the common suffix
        q = len(text) - bottom + 1
        while q < len(text) and not _cut(text, q):
            q += 1
        q = min(q, len(text))
        shift = len(text) - len(old)
        q_old = q - shift
        kept = [m for m in self.matches if m[1] <= p]
        kept += [(m.start(), m.end(), m.group(1)) for m in pattern.finditer(text, p, q)]
        kept += [(s + shift, e + shift, g) for s, e, g in self.matches if s >= q_old]
        self.matches, self.text, self.searched = kept, text, q - p
