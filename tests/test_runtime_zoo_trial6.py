"""A sixth fresh trial (fixtures/runtime/zoo_trial6.py): every correct architecture passes and
every planted bug is caught and named (module, op, tensor or buffer). The general causes the
trial found are tested alone in test_runtime_cufft.py (an FFT a GPU refuses in low precision,
which the CPU's missing kernel hid) and test_runtime_scaled_grads.py (``torch.autograd.grad``
of ``scaler.scale(...)`` used undivided). CPU only, tiny models; the whole file takes ~11 s of
CPU on one core."""

import pytest
from conftest import assert_caught_and_named, check_zoo_model, load_runtime_zoo

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

zoo = load_runtime_zoo("zoo_trial6")


def test_the_trial_is_large_enough():
    assert len(zoo.CORRECT) >= 12 and len(zoo.PLANTED) >= 6


@pytest.mark.parametrize("factory", zoo.CORRECT, ids=lambda f: f.__name__)
def test_correct_model_passes(factory):
    r = check_zoo_model(factory)
    assert r.ok, str(r)


@pytest.mark.parametrize("factory", list(zoo.PLANTED), ids=lambda f: f.__name__)
def test_planted_bug_is_caught_and_named(factory):
    assert_caught_and_named(check_zoo_model(factory), *zoo.PLANTED[factory])
