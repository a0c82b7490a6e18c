"""The memory budget's counts of an editor buffer, counted again only around an edit
(devlint/lsp/budget_counts.py), equal devlint.memory_budget.counts of the whole piece on random
edits; the widest character found over all lines."""

from __future__ import annotations

import random

import pytest

from conftest import ROOT
from devlint import memory_budget
from devlint.lsp import budget_counts
from devlint.lsp.budget_counts import PieceCounts

#: what random edits insert: quotes of every kind (triple ones that open and close strings
#: across chunks), comments, f-string prefixes, brackets, newlines, words
PIECES = ['"""', "'''", '"', "'", "#", "# c\n", "f", "rf", "(", ")", "[", "]", "{", "}", "\n", "\n    ", " ", "x",
          "word", "\\", "é", "\U0001F600", "f'{x}'", '"""doc\n"""', "(\n", ")\n"]


def _text() -> str:
    parts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "devlint" / "rules").glob("*.py"))[:4]]
    return "\n".join(parts)


def _edit(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text) + 1)
    if rng.random() < 0.35:
        return text[:at] + text[at + rng.randrange(1, 20):]
    return text[:at] + "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 3))) + text[at:]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_counts_around_edits_are_those_of_the_whole_piece(monkeypatch, seed):
    monkeypatch.setattr(budget_counts, "CHUNK_CHARS", 512)  # many chunks in a short text
    rng = random.Random(seed)
    text = _text()
    counter = PieceCounts()
    partial = 0
    for step in range(250):
        text = _edit(text, rng)
        if rng.random() < 0.05:  # now and then a whole new text
            text = _text()[rng.randrange(2000):]
        assert counter(text) == memory_budget._counted(text), f"step {step}"
        partial += counter.counted < len(text) // 4
    assert partial > 40  # many were counted around the edit (an unclosed triple quote: whole)


def test_typing_in_a_long_real_text_counts_one_chunk():
    text = _text()
    lines = text.split("\n")
    counter = PieceCounts()
    assert counter(text) == memory_budget._counted(text)
    row = len(lines) // 2
    for key in "  # typing":
        lines[row] += key
        text = "\n".join(lines)
        assert counter(text) == memory_budget._counted(text)
        assert counter.counted < 3 * budget_counts.CHUNK_CHARS


def test_the_widest_character_of_any_line_sets_the_bytes_a_character_takes():
    def extra(lines, plain):  # bytes over the same text in one-byte characters
        return memory_budget.plan(lines, [0, len(lines)]).bytes - memory_budget.plan(plain, [0, len(plain)]).bytes

    per_char = memory_budget.TEXT_COPIES
    assert extra(["a", "\u0100"], ["a", "b"]) == 1 * (4 * per_char + 3 * memory_budget.CHAR_COPIES)
    assert extra(["", "\U0001F600", "\u0100"], ["", "b", "c"]) == 3 * (5 * per_char + 4 * memory_budget.CHAR_COPIES)
    assert extra(["\u0100", "", "a"], ["b", "", "a"]) == 1 * (5 * per_char + 4 * memory_budget.CHAR_COPIES)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 11])
def test_edits_at_every_chunk_boundary(monkeypatch, chunk):
    """Each edit right before, at and after a boundary: a boundary taken where a literal
    starts after a line ending in ``f`` (counted as an f-string in the whole text), or one
    whose newline the edit removed (words joined across it), is caught here."""
    monkeypatch.setattr(budget_counts, "CHUNK_CHARS", chunk)
    block = "x = f\n# c ()\n'a' + f\n\"b\" f\nif\nrf'{y}'\ndef g(y):\n    return (y)\n"
    base = block * 12
    counter = PieceCounts()
    assert counter(base) == memory_budget._counted(base)
    bounds = list(counter.bounds[1:-1])
    assert len(bounds) > 12
    for b in bounds:
        for at, cut, add in ((b - 1, 1, ""), (b, 1, ""), (b - 1, 0, "x"), (b, 0, "x"), (b, 0, "#"), (b, 0, "'"),
                             (b - 1, 1, "f\n#"), (b, 0, "'''"), (b - 2, 2, "")):
            counter = PieceCounts()
            counter(base)  # b a boundary again
            text = base[:at] + add + base[at + cut:]
            assert counter(text) == memory_budget._counted(text), (b, at, cut, add)
            assert counter(base) == memory_budget._counted(base)


def test_a_text_in_several_pieces_keeps_the_counts_of_the_pieces_an_edit_left(monkeypatch):
    """The chunked counter serves a text parsed whole; a text in pieces is counted per piece by
    memory_budget.counts, whose cache keeps the unchanged pieces (fed one piece after another,
    the counter would count each against another piece: all of it)."""
    monkeypatch.setattr(memory_budget, "PIECE_LINES", 40)
    lines = [f"x{k} = f({k})" for k in range(200)]
    counter = PieceCounts()
    counted = []
    monkeypatch.setattr(memory_budget, "_counted", lambda piece, real=memory_budget._counted: counted.append(piece) or real(piece))
    text = "\n".join(lines)
    bounds = memory_budget.piece_bounds(text, lines)
    assert len(bounds) > 3
    memory_budget.estimate(text, count=counter)
    lines[50] += "  # edit"
    counted.clear()
    edited = memory_budget.estimate("\n".join(lines), count=counter)
    assert len(counted) == 1 and edited == memory_budget.estimate("\n".join(lines))
