"""Every rule's own flagged and clean examples (the ones its docs show) run as tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from devlint.engine import lint
from devlint.rule import Rule
from devlint.rules import all_rules

from conftest import markers, mismatches

ROOT = Path(__file__).resolve().parents[1]

RULES = all_rules()
FLAGGED = [(r, i, src) for r in RULES for i, src in enumerate(r.flagged)]
CLEAN = [(r, i, src) for r in RULES for i, src in enumerate(r.clean)]


def test_every_rule_has_examples_and_docs():
    for rule in RULES:
        assert rule.flagged and rule.clean, rule.code
        assert rule.what_it_does.strip() and rule.why_bad.strip() and rule.fix_safety.strip(), rule.code
        assert rule.code.startswith("DEV") and len(rule.code) == 6, rule.code
        assert not rule.message.endswith(".") and not rule.message.lower().startswith("please"), rule.code
        assert ":" in rule.message, f"{rule.code}: the message should give the fix after a colon"


@pytest.mark.parametrize("rule,index,source", FLAGGED, ids=[f"{r.code}-flagged-{i}" for r, i, _ in FLAGGED])
def test_flagged_example(rule, index, source):
    source = rule.runnable(source)
    need, _ = markers(source, rule.code)
    assert need, "a flagged example must mark the lines it expects"
    got = {(f.line, f.code) for f in lint(source, "example.py")}
    assert mismatches(source, got, rule.code) == []


@pytest.mark.parametrize("rule,index,source", CLEAN, ids=[f"{r.code}-clean-{i}" for r, i, _ in CLEAN])
def test_clean_example(rule, index, source):
    assert [f for f in lint(rule.runnable(source), "example.py") if f.code == rule.code] == []


def test_docs_have_ruff_sections():
    for rule in RULES:
        docs = rule.docs()
        for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
            assert section in docs, (rule.code, section)
        assert rule.flagged[0].strip() in docs


def test_every_message_is_shorter_than_80_characters():
    """The developers' guide: ``CODE what is wrong: the fix in a few words``, under 80
    characters, however long the user's names are (each rule falls back to a shorter
    spelling, :meth:`devlint.rule.Rule.fitted`)."""
    long_names = (
        "import torch\n"
        "self_supervised_model_optimizer = torch.optim.SGD([])\n"
        "x = torch.hub.load_state_dict_from_url('u')\n"
        "torch.cuda.reset_peak_memory_stats_of_every_device_there_is()\n"
    )
    sources = [Rule.runnable(e) for r in all_rules() for e in r.flagged]
    sources += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures" / "lint").rglob("*.py"))]
    sources.append(long_names)
    messages = {f"{f.code} {f.message}" for s in sources for f in lint(s)}
    assert len(messages) > 50
    too_long = sorted(m for m in messages if len(m) >= 80)
    assert not too_long, too_long
