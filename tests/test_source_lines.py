"""Lines cut with ``str.splitlines`` where the text holds no other line break it knows
(devlint.source) are those of Python's line endings (``\\r\\n``, ``\\r``, ``\\n``), on random texts."""

from __future__ import annotations

import random

from devlint.source import NEWLINE, line_starts, split_lines

PIECES = ["a", "\n", "\r", "\r\n", "\n\r", "", "é", "\v", "\f", "\x1c", "\x85", "\u2028", "  ", "#"]


def test_lines_and_their_starts_are_cut_at_line_endings_only():
    rng = random.Random(11)
    for _ in range(20000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 8)))
        ends = [m.end() for m in NEWLINE.finditer(text)]
        assert line_starts(text) == [0, *ends], repr(text)
        cuts = [0, *ends, *([len(text)] if (ends[-1] if ends else 0) < len(text) else [])]
        assert split_lines(text, keepends=True) == [text[a:b] for a, b in zip(cuts, cuts[1:])], repr(text)
        plain = NEWLINE.split(text)
        assert split_lines(text) == (plain[:-1] if plain and plain[-1] == "" else plain), repr(text)
