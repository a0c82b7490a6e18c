"""A fifth fresh trial (fixtures/runtime/zoo_trial5.py): every correct architecture passes and
every planted bug is caught and named (module, op, tensor or buffer). The general causes the
trial found are tested alone in test_runtime_stand_in_refusals.py (``Tensor.numpy()`` and CPU
generators on the stand-in), test_runtime_placement_names.py (globals, closures, tensors torch
makes for the step) and test_runtime_check.py (a step's own disabled GradScaler). CPU only,
tiny models; the whole file takes ~25 s on one core."""

import pytest
from conftest import assert_caught_and_named, check_zoo_model, load_runtime_zoo

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

zoo = load_runtime_zoo("zoo_trial5")


def test_the_trial_is_large_enough():
    assert len(zoo.CORRECT) >= 12 and len(zoo.PLANTED) >= 10


@pytest.mark.parametrize("factory", zoo.CORRECT, ids=lambda f: f.__name__)
def test_correct_model_passes(factory):
    r = check_zoo_model(factory)
    assert r.ok, str(r)


@pytest.mark.parametrize("factory", list(zoo.PLANTED), ids=lambda f: f.__name__)
def test_planted_bug_is_caught_and_named(factory):
    assert_caught_and_named(check_zoo_model(factory), *zoo.PLANTED[factory])
