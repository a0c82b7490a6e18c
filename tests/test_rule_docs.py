"""``devlint rule`` reads each rule's docs from the rule files as text (devlint/rule_docs.py):
they must be the docs of the rule classes the linter imports, for every rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from devlint import rule_docs
from devlint.rules import all_rules


def test_the_docs_read_from_the_files_are_the_rule_classes_docs():
    read = {docs.code: docs for docs in rule_docs.read_all()}
    assert list(read) == [rule.code for rule in all_rules()]
    for rule in all_rules():
        docs = read[rule.code]
        assert (docs.name, docs.message, docs.summary()) == (rule.name, rule.message, rule.summary()), rule.code
        assert rule_docs.markdown(docs) == rule.docs(), rule.code


def test_an_attribute_that_is_not_a_literal_is_refused():
    node = ast.parse('class Rule9(Rule):\n    code = "DEV999"\n    message = PREFIX + " is wrong"\n').body[0]
    with pytest.raises(ValueError, match=r"x\.py:3: Rule9\.message is not a literal"):
        rule_docs._literals(node, Path("x.py"))
