"""The language server's search for the calls of imported names, done again only around an edit
(devlint/project/call_scan.py), gives what a search of the whole text gives, on random edits."""

from __future__ import annotations

import random

import pytest

from conftest import ROOT
from devlint.project.call_scan import CallScan
from devlint.project.index import calls_pattern

#: the pieces random edits are made of: the heads and their calls, whitespace of every kind,
#: brackets, dots, the characters next to which a cut point is or is not
PIECES = ["np", "torch", "helpers", "h", "(", ")", ".", " ", "  ", "\t", "\n", "\n    ", "\r", "\f", "\u00a0",
          "x", "_", "9", "é", "#", "'", '"', "np.f(", "helpers.move (", "h\n(", "h \t\n  (", "def ", "a.h(", "xh("]


def _text() -> str:
    lines = []
    for path in sorted((ROOT / "fixtures" / "projects").rglob("*.py"))[:6]:
        lines.append(path.read_text(encoding="utf-8"))
    return "\n".join(lines) * 3


def _edit(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text) + 1)
    if rng.random() < 0.3:
        return text[:at] + text[at + rng.randrange(1, 12):]
    if rng.random() < 0.1:  # a far edit: two changed places, the search spans both
        other = rng.randrange(len(text) + 1)
        at, other = min(at, other), max(at, other)
        return text[:at] + rng.choice(PIECES) + text[at:other] + rng.choice(PIECES) + text[other:]
    return text[:at] + "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 4))) + text[at:]


@pytest.mark.parametrize("heads", [{"np", "torch", "helpers", "h"}, {"h", ""}, {"a(b", "np"}])
def test_calls_searched_around_edits_are_those_of_the_whole_text(heads):
    pattern = calls_pattern(heads)
    rng = random.Random(27)
    text = _text()
    scan = CallScan()
    partial = 0
    for step in range(400):
        text = _edit(text, rng)
        if len(text) > 60_000:
            text = text[:30_000]
        found = scan.names(text, pattern)
        assert found == pattern.findall(text), f"step {step}"
        partial += scan.searched < len(text) // 2
    assert partial > 300  # the searches were around the edits, not of the whole text


def test_a_new_pattern_searches_the_whole_text():
    scan = CallScan()
    text = "import np\nnp.f(x)\nh(1)\n"
    assert scan.names(text, calls_pattern({"np"})) == ["np.f"]
    assert scan.names(text, calls_pattern({"np", "h"})) == ["np.f", "h"]
    assert scan.searched == len(text)


def test_dense_edits_of_names_whose_tails_are_names_too():
    """Short texts of few characters, edits one to three characters long: a cut point placed
    one character too close to the edit (inside it) is caught here."""
    pattern = calls_pattern({"h", "xh", "p", "np"})
    alphabet = ["h", "x", "n", "p", "(", " ", "\n", ".", "xh(", "np (", "a"]
    rng = random.Random(13)
    for _ in range(40):
        text = "".join(rng.choice(alphabet) for _ in range(120))
        scan = CallScan()
        for step in range(150):
            at = rng.randrange(len(text) + 1)
            if rng.random() < 0.5 and text:
                text = text[:at] + text[at + rng.randrange(1, 4):]
            else:
                text = text[:at] + "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 3))) + text[at:]
            assert scan.names(text, pattern) == pattern.findall(text), (step, text)
