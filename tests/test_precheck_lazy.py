"""DEV111's pre-check does no work a file cannot use (issue 27's findings-dense rows): the scopes
of a file whose calls all go by before they are asked (no argument) are never built, and a file
without an augmented-assignment operator is not walked for ``x += e``. Both are exact: the
findings stay (the equivalence tests of ``test_precheck.py`` compare them), only the work goes."""

from __future__ import annotations

import ast
import random

import pytest

from devlint import precheck
from devlint.dataflow import DTYPES
from devlint.precheck_predicates import Facts, may_augment, unit_may_move
from devlint.rules.input_not_on_model_device import InputNotOnModelDevice

#: each100k.py's shape: every line a ``.cuda()`` without argument
DENSE = "import torch\n" + "".join(f"x{i} = y.cuda()\n" for i in range(200))

AUGMENTED = ["+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", ">>=", "<<="]


def _facts(text: str) -> Facts:
    return Facts(ast.parse(text), text)


def test_scopes_are_not_built_for_calls_without_arguments():
    facts = _facts(DENSE)
    assert not InputNotOnModelDevice.candidate(facts)
    assert "dev_scopes" not in facts.memo


def test_scopes_are_built_once_a_call_may_report():
    text = DENSE + "def step(model, x):\n    return model(x)\n"
    facts = _facts(text)
    InputNotOnModelDevice.candidate(facts)  # model(x) has an argument: its frame is asked
    assert "dev_scopes" in facts.memo


@pytest.mark.parametrize("op", AUGMENTED)
def test_every_augmented_operator_is_seen(op):
    text = f"x = 1\nx {op} 2\n"
    assert any(isinstance(n, ast.AugAssign) for n in ast.walk(ast.parse(text)))
    assert may_augment(_facts(text))


@pytest.mark.parametrize("text", ["a = b <= c >= d != e == f\n", "f(x=-1, y=+2, z=~3)\n", "a = b*-1 if c<-1 else d>-2\n"])
def test_comparisons_and_signed_arguments_are_no_augmented_assignment(text):
    assert not may_augment(_facts(text))


def test_a_text_without_the_operator_holds_no_augmented_assignment():
    """Random statements from pieces with and without augmented assignments: whenever the tree
    holds one, :func:`may_augment` says so."""
    pieces = ["x = y.cuda()", "t[:, 2:] {op} e", "a {op} b", "if a <= b:\n    c = d", "f(k=-1)", "s = 'x {op} y'",
              "z = w ** 2", "q = r // 3", "u = v << 1"]
    rng = random.Random(27)
    for _ in range(300):
        lines = [rng.choice(pieces).replace("{op}", rng.choice(AUGMENTED)) for _ in range(rng.randint(1, 6))]
        text = "\n".join(lines) + "\n"
        tree = ast.parse(text)
        if any(isinstance(n, ast.AugAssign) for n in ast.walk(tree)):
            assert may_augment(Facts(tree, text)), text


def test_unit_may_move_is_kept_per_unit():
    facts = _facts(DENSE + "def f(x):\n    return x + 1\n")
    first = [unit_may_move(u, facts, DTYPES) for u in facts.units]
    assert first == [True, False]
    assert [unit_may_move(u, facts, DTYPES) for u in facts.units] == first
    assert len(facts.memo["unit_may_move"]) == 2


def test_dense_file_keeps_its_rules():
    """The lazy scopes change no candidate list: DEV102 only, as before."""
    kept, _tree = precheck.candidates(DENSE, [InputNotOnModelDevice])
    assert kept == []
