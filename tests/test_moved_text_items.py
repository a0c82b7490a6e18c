"""DeviceFlow's text-like names moved somewhere in the file (devlint.flow_tables.moved_text_items,
searched from each move) are those of the pattern it stands for (_NAME_MOVE, searched from every
word), on random texts of names, moves, casts and word characters beyond ASCII."""

from __future__ import annotations

import random

from devlint.flow_tables import _NAME_MOVE, _TEXT_ITEMS, moved_text_items

PIECES = ["text", "Texts", "TEXT", "caption", "x", "_", "é", "İ", "ß", "sentences", "asentences", "prompt1", "a" * 9,
          ".to(", ".cuda(", ".to(dtype=", ".to( torch.float", ".to(torch.x", " ", "\n", ".", "word", "words", "("]


def _by_pattern(text: str) -> frozenset[str]:
    return frozenset(n.lower() for n in _NAME_MOVE.findall(text) if n.lower() in _TEXT_ITEMS)


def test_moved_text_items_are_those_of_the_pattern():
    rng = random.Random(5)
    found = 0
    for _ in range(20000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 12)))
        assert moved_text_items(text) == _by_pattern(text), text
        found += bool(_by_pattern(text))
    assert found > 1000
    assert moved_text_items("asentences.to(d); sentences.cuda(); TEXT.to(dtype=x)") == {"sentences"}
