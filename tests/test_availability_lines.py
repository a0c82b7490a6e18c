"""The lines the guard tracker parses for names assigned from an availability test
(devlint.guards.availability_lines, cut only around each occurrence) are those of
``text.splitlines()`` that hold one, on random texts with every line boundary splitlines knows."""

from __future__ import annotations

import random

from devlint.guards import availability_lines

PIECES = ["is_available", "device_count", "=", "==", "x", " ", "use_cuda = torch.cuda.is_available()", "\n", "\r", "\r\n",
          "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "n = torch.cuda.device_count()", "is_", "é"]


def _by_split(text: str) -> list[str]:
    return [line for line in text.splitlines() if ("is_available" in line or "device_count" in line) and "=" in line]


def test_availability_lines_are_those_of_splitlines():
    rng = random.Random(13)
    found = 0
    for _ in range(20000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 14)))
        assert availability_lines(text) == _by_split(text), repr(text)
        found += len(_by_split(text)) > 1
    assert found > 1000, found
