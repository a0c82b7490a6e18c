"""The judged corpus of training scripts (``benchmarks/scripts/``) gives exactly the marked findings.

``benchmarks/scripts.py`` lints the corpus and scores it against its ``# expect:``/``# either:``
marks; this test keeps that score exact: every miss and every false positive is listed here, so a
change that fixes one (or makes a new one) has to say so.
"""

from __future__ import annotations

import importlib.util

from conftest import ROOT

SPEC = importlib.util.spec_from_file_location("scripts_corpus", ROOT / "benchmarks" / "scripts.py")
corpus = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(corpus)
FILES = sorted(corpus.CORPUS.glob("*.py"))

#: Misses judged against RULES.md and not fixed yet: (file, line, code).
KNOWN_MISSES: list[tuple[str, int, str]] = []
#: False positives judged against RULES.md and not fixed yet: (file, line, code).
KNOWN_FALSE_POSITIVES: list[tuple[str, int, str]] = []


def test_corpus_is_a_corpus_of_marked_scripts():
    texts = [p.read_text(encoding="utf-8") for p in FILES]
    assert len(FILES) >= 35
    assert all(40 <= len(t.splitlines()) <= 400 for t in texts)
    flagged = sum(bool(corpus.marks(t)[0]) for t in texts)
    assert flagged >= 15 and len(FILES) - flagged >= 10  # scripts with findings, and wholly clean ones


def test_marks_are_parsed_like_the_fixtures():
    need, maybe = corpus.marks("x = 1  # expect: DEV102 DEV208\ny = 2  # expect: DEV101|DEV102\nz  # either: DEV111\n")
    assert need == [(1, frozenset({"DEV102"})), (1, frozenset({"DEV208"})), (2, frozenset({"DEV101", "DEV102"}))]
    assert maybe == {(3, "DEV111")}



def test_corpus_findings_match_the_marks_exactly():
    result = corpus.score(FILES, corpus.lint(FILES))
    assert result["fn"] == KNOWN_MISSES
    assert result["fp"] == KNOWN_FALSE_POSITIVES
    tp = sum(c.get("tp", 0) for c in result["rules"].values())
    assert tp >= 35 and "DEV111" in result["rules"] and result["rules"]["DEV111"].get("tp", 0) >= 6


def test_score_counts_either_marks_neither_way(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("a  # expect: DEV101\nb  # either: DEV102\nc\nd  # expect: DEV104\n")
    result = corpus.score([script], {"s.py": {(1, "DEV101"), (2, "DEV102"), (3, "DEV103")}})
    assert result["rules"]["DEV101"]["tp"] == 1 and result["rules"]["DEV102"] == {"either_marked": 1, "either": 1}
    assert result["fp"] == [("s.py", 3, "DEV103")] and result["fn"] == [("s.py", 4, "DEV104")]
