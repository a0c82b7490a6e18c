"""An eighth fresh trial (fixtures/runtime/zoo_trial8.py): every correct architecture passes and
every planted bug is caught and named (module, op, tensor or attribute). The general causes the
trial found are tested alone in test_runtime_placement_names.py (a plain attribute reached
through a 0-dim view) and test_runtime_causes.py (the op of a low-precision step error). CPU
only, tiny models."""

import pytest
from conftest import assert_caught_and_named, check_zoo_model, load_runtime_zoo

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

zoo = load_runtime_zoo("zoo_trial8")


def test_the_trial_is_large_enough():
    assert len(zoo.CORRECT) >= 12 and len(zoo.PLANTED) >= 7


@pytest.mark.parametrize("factory", zoo.CORRECT, ids=lambda f: f.__name__)
def test_correct_model_passes(factory):
    r = check_zoo_model(factory)
    assert r.ok, str(r)


@pytest.mark.parametrize("factory", list(zoo.PLANTED), ids=lambda f: f.__name__)
def test_planted_bug_is_caught_and_named(factory):
    assert_caught_and_named(check_zoo_model(factory), *zoo.PLANTED[factory])
