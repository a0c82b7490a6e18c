"""``docs/rules.md`` is generated from the rule classes and must be kept in step."""

from __future__ import annotations

from devlint import docs
from devlint.rules import all_rules

from conftest import ROOT


def test_docs_rules_md_is_up_to_date():
    path = ROOT / "docs" / "rules.md"
    current = path.read_text() if path.exists() else ""
    assert current == docs.render(), f"docs/rules.md is stale: regenerate it with `{docs.COMMAND}`"


def test_every_rule_has_a_section():
    text = docs.render()
    for rule in all_rules():
        assert f"## {rule.name} ({rule.code})" in text
        assert f'<a id="{rule.code.lower()}"></a>' in text
