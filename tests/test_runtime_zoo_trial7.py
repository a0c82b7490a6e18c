"""A seventh fresh trial (fixtures/runtime/zoo_trial7.py): every correct architecture passes and
every planted bug is caught and named (module, op, tensor or attribute). The general cause the
trial found is tested alone in test_runtime_frozen_half.py (a frozen float16 base under LoRA
adapters is no master-weights problem). CPU only, tiny models."""

import pytest
from conftest import assert_caught_and_named, check_zoo_model, load_runtime_zoo

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

zoo = load_runtime_zoo("zoo_trial7")


def test_the_trial_is_large_enough():
    assert len(zoo.CORRECT) >= 12 and len(zoo.PLANTED) >= 10


@pytest.mark.parametrize("factory", zoo.CORRECT, ids=lambda f: f.__name__)
def test_correct_model_passes(factory):
    r = check_zoo_model(factory)
    assert r.ok, str(r)


@pytest.mark.parametrize("factory", list(zoo.PLANTED), ids=lambda f: f.__name__)
def test_planted_bug_is_caught_and_named(factory):
    assert_caught_and_named(check_zoo_model(factory), *zoo.PLANTED[factory])
