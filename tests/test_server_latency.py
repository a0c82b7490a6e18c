"""What keeps the server's latency down, checked for behaviour (never for time; speed is in
``benchmarks/bench_server.py``): a burst of changes ends in one lint of the last text, started
after its last change; the ``ast`` pre-check on the server path (only the changed statements
parsed by ``ast``) gives ``devlint check``'s findings, DEV000 and ``# noqa`` included, and
spares the traversal of a text with no candidate rule."""

from __future__ import annotations

import ast
import random
import threading
import time
import zipfile
from functools import partial

import pytest

import devlint.engine as engine
from devlint.incremental import StatementCache
from devlint.lsp.document_lint import Cancelled, DocumentState, lint_text
from devlint.lsp.worker import Job, Linter
from devlint.runner import check_source

from conftest import LINT_FIXTURES, ROOT
from test_server_incremental import edit

PATH = "/nonexistent-devlint-test/train.py"  # no pyproject.toml: the defaults
#: triggers DEV103 and DEV105 (text pre-screen) but holds no candidate node for either
NO_CANDIDATE = (
    "import torch\n"
    "\n"
    "\n"
    "class A:\n"
    "    def cuda(self):  # noqa: DEV103\n"
    "        return torch.device(\"cpu\")\n"
)
LONG = "x = " + "+".join(["a"] * 6000) + "\n"  # skipped by the engine, reported as DEV000


def full(text: str) -> list:
    return check_source(text.encode(), PATH, ["DEV"], [])


def counting(monkeypatch) -> list[int]:
    """Count the traversals :func:`devlint.lsp.document_lint.lint_text` runs (it reaches
    :func:`devlint.engine.lint_module` through :func:`devlint.engine.lint_parsed_by`)."""
    calls: list[int] = []
    real = engine.lint_module

    def counted(*args, **kwargs):
        if kwargs.get("positions") is not None:  # the server's (the CLI keeps no positions memo)
            calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "lint_module", counted)
    return calls


def test_no_candidate_rule_means_no_traversal_and_the_clis_findings(monkeypatch):
    calls = counting(monkeypatch)
    state = DocumentState()
    texts = [NO_CANDIDATE, NO_CANDIDATE + "y = torch.zeros(2)\n", NO_CANDIDATE + LONG, LONG + NO_CANDIDATE + "# noqa\n"]
    for text in texts:
        got = lint_text(text, PATH, state)
        assert got == full(text), text[:80]
        assert state.precheck  # it keeps paying: no rule was left
    assert calls == []
    assert [f.code for f in lint_text(NO_CANDIDATE + LONG, PATH, state)] == ["DEV000"]
    # a candidate appears: the traversal runs, and the next lints skip the pre-check
    flagged = NO_CANDIDATE + "x = torch.ones(1).cuda()\n"
    assert [f.code for f in lint_text(flagged, PATH, state)] == ["DEV102"] == [f.code for f in full(flagged)]
    assert calls == [1] and not state.precheck
    quiet = flagged.replace(".cuda()", ".cuda()  # noqa: DEV102")
    assert lint_text(quiet, PATH, state) == full(quiet) == []
    assert calls == [1, 1]


def test_a_syntax_error_after_a_precheck_keeps_earlier_findings_and_adds_dev000():
    state = DocumentState()
    flagged = NO_CANDIDATE + "x = torch.ones(1).cuda()\n"
    lint_text(NO_CANDIDATE, PATH, state)
    assert [f.code for f in lint_text(flagged, PATH, state)] == ["DEV102"]
    broken = flagged + "def f(\n"
    assert sorted(f.code for f in lint_text(broken, PATH, state)) == ["DEV000", "DEV102"]
    assert [f.code for f in full(broken)] == ["DEV000"]  # the CLI has no earlier text to keep


@pytest.mark.parametrize("name", ["r10_report.py", "r12_report.py", "r20_report.py", "seed_reference_example.py"])
def test_the_per_statement_stdlib_tree_is_ast_parse_without_positions(name):
    text = (LINT_FIXTURES / name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    rng = random.Random(name)
    cache = StatementCache()
    cache.parse(text)
    compared = reused = 0
    for _ in range(40):
        new = edit(lines, rng)
        try:
            expected = ast.parse(new)
            before = {id(s): s for s in cache.module.body} if cache.module is not None else {}
            old = dict(cache._stdlib)
            cache.parse(new)
        except Exception:  # noqa: BLE001 - a syntax error: nothing to compare
            continue
        tree = cache.stdlib_tree()
        assert tree is not None
        assert ast.dump(tree) == ast.dump(expected), name
        # an unchanged statement keeps its stdlib nodes: only the edit is parsed again
        kept = [s for s in cache.module.body if id(s) in before and id(s) in old and old[id(s)][0] is s]
        assert all(cache._stdlib[id(s)][1] is old[id(s)][1] for s in kept)
        reused += bool(kept)
        compared += 1
        lines = new.splitlines(keepends=True)
    assert compared >= 15 and reused >= compared - 3


def assert_same_facts(joined, whole) -> None:
    """Slot for slot, the same nodes in the same order (dict keys too)."""
    from devlint.precheck_predicates import _JOINED, Facts

    assert set(Facts.__slots__) == _JOINED

    def ids(value):
        if isinstance(value, dict):
            return [(k, ids(v)) for k, v in value.items()]
        if isinstance(value, list):
            return [id(v) for v in value]
        return value

    for slot in sorted(_JOINED - {"memo", "units"}):
        assert ids(getattr(joined, slot)) == ids(getattr(whole, slot)), slot
    assert len(joined.units) == len(whole.units)
    for a, b in zip(joined.units, whole.units):
        assert a.node is b.node and ids(a.statements) == ids(b.statements) and a.keywords == b.keywords
        assert ids(a.methods) == ids(b.methods) and ids(a.functions) == ids(b.functions)


@pytest.mark.parametrize("name", ["r10_report.py", "r20_report.py", "seed_reference_example.py"])
def test_facts_joined_per_statement_are_the_facts_of_the_whole_tree(name):
    from devlint.precheck import Facts

    text = (LINT_FIXTURES / name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    rng = random.Random(name)
    cache = StatementCache()
    cache.parse(text)
    compared = 0
    for _ in range(25):
        new = edit(lines, rng)
        try:
            cache.parse(new)
        except Exception:  # noqa: BLE001 - a syntax error: nothing to compare
            continue
        joined = cache.precheck_facts()
        assert joined is not None and joined.text == new
        assert_same_facts(joined, Facts(joined.tree, new))
        compared += 1
        lines = new.splitlines(keepends=True)
    assert compared >= 10


def real_texts() -> list[tuple[str, str]]:
    """The benchmark's 10k-line file (no candidate rule) when its wheel is cached."""
    found = []
    for wheel in sorted((ROOT / "benchmarks" / ".cache" / "wheels").glob("transformers-4.46.3-*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            found.append(("dummy_pt_objects.py", archive.read("transformers/utils/dummy_pt_objects.py").decode()))
    return found


@pytest.mark.skipif(not real_texts(), reason="the benchmark's transformers wheel is not cached")
def test_edits_of_a_file_without_candidates_match_the_cli(monkeypatch):
    name, text = real_texts()[0]
    calls = counting(monkeypatch)
    state = DocumentState()
    rng = random.Random(name)
    assert lint_text(text, PATH, state) == full(text) == []
    lines = text.split("\n")
    tops = [k for k, line in enumerate(lines) if line.startswith("class ")]
    for step in range(6):
        k = rng.choice(tops)
        lines.insert(k, lines[k] if step % 2 else "x = torch.ones(1).cuda()")
        new = "\n".join(lines)
        assert lint_text(new, PATH, state) == full(new), step
        del lines[k]
    assert len(calls) == 3  # the three texts with a .cuda() call were traversed, the others not


def test_a_burst_ends_in_one_lint_of_the_last_text_started_after_its_last_change():
    """A lint starts at once; each change stops the running one at its next statement; after
    the last change exactly one lint starts, of the last text, and only it is published."""
    body = "import torch\n" + "".join(f"def f{k}(x):\n    return x.cuda() + {k}\n\n" for k in range(400))
    state = DocumentState()
    starts: list[tuple[float, int]] = []
    finished: list[tuple[int, bool, bool]] = []  # (generation, gave up, stale)
    published = threading.Event()

    def run(job: Job):
        starts.append((time.monotonic(), job.generation))
        return lint_text(job.docs[0][1], None, state, cancelled=partial(linter.superseded, job))

    def done(job: Job, result, stale: bool) -> None:
        finished.append((job.generation, result is None, stale))
        if result is not None and not stale:
            published.set()

    linter = Linter(run, done)
    try:
        for k in range(12):
            text = body + "\n" * k + "y = torch.ones(1).cuda()\n"
            linter.submit(Job("doc", k + 1, [("doc", text)], None, False, time.monotonic()))
            time.sleep(0.01)
        assert published.wait(60)
        time.sleep(0.2)
    finally:
        linter.stop()
    assert [generation for _, generation in starts].count(12) == 1 and starts[-1][1] == 12
    assert [f for f in finished if not f[1] and not f[2]] == [(12, False, False)]
    assert all(gave_up or stale for generation, gave_up, stale in finished if generation != 12)
    assert any(gave_up for _, gave_up, _ in finished)  # a stale lint stopped half-way


def test_a_cancelled_lint_raises_and_leaves_the_state_usable():
    state = DocumentState()
    text = NO_CANDIDATE + "x = torch.ones(1).cuda()\n" * 50
    with pytest.raises(Cancelled):
        lint_text(text, PATH, state, cancelled=lambda: True)
    assert lint_text(text, PATH, state) == full(text)
