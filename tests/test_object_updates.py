"""DEV204's ``self.a.b`` names called ``.update(`` somewhere in the file
(devlint.rules.grad_scaler_update_missing.object_updates, searched from each ``.update(``) are
those of the pattern it stands for (_OBJECT_UPDATE, tried at every position), on random texts
of dotted names, ``self`` inside longer words, word characters beyond ASCII and runs longer
than the search's first window."""

from __future__ import annotations

import random

from devlint.rules.grad_scaler_update_missing import _OBJECT_UPDATE, object_updates

PIECES = ["self", "self.", ".", "..", "update", "(", ".update(", ".update", "a", "_", "x1", "é", "İ", "myself",
          "s", "elf", " ", "\n", "self.self", "scaler", ".scaler" * 60, "a." * 150]


def _by_pattern(text: str) -> frozenset[str]:
    return frozenset(m.group(1) for m in _OBJECT_UPDATE.finditer(text))


def test_object_updates_are_those_of_the_pattern():
    rng = random.Random(7)
    found = 0
    for _ in range(20000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 12)))
        assert object_updates(text) == _by_pattern(text), text
        found += bool(_by_pattern(text))
    assert found > 500
    long = "x = 1\n" + "self" + ".scaler" * 200 + ".update()\nmyself.s.update(x)\n"
    assert object_updates(long) == {"self" + ".scaler" * 200, "self.s"} == _by_pattern(long)
