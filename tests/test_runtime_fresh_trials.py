"""The fresh trials (fixtures/runtime/zoo_trial3.py ... zoo_trial10.py): in each, every correct
architecture passes and every planted bug is caught and named (module, op, tensor or buffer),
checked on the CPU as ``check_step(step, devices=["cpu"])``. Each trial's general causes are
tested alone elsewhere:

- trial 3: test_runtime_zoo_trial3.py (a ``torch.autocast("cuda")`` made at import, gradients
  edited before ``scaler.unscale_``, update errors only a floor judges);
- trial 4: test_runtime_zoo_trial4.py (a GradScaler made on every call, unscaled backwards in
  accumulation, ``.tolist()`` on the stand-in, a widened convolution's rounding);
- trial 5: test_runtime_stand_in_refusals.py (``Tensor.numpy()``, CPU generators),
  test_runtime_placement_names.py (globals, closures, tensors torch makes) and
  test_runtime_check.py (a step's own disabled GradScaler);
- trial 6: test_runtime_cufft.py (a float16 FFT cuFFT refuses) and test_runtime_scaled_grads.py
  (``torch.autograd.grad`` of ``scaler.scale(...)`` undivided);
- trial 7: test_runtime_frozen_half.py (a frozen float16 base under LoRA),
  test_runtime_late_backward.py (a scaled backward after ``unscale_``) and
  test_runtime_underflow_zero.py (the underflow behind a ``log(0)``);
- trial 8: test_runtime_placement_names.py (a plain attribute reached through a 0-dim view) and
  test_runtime_causes.py (the op of a low-precision step error, an ``add`` whose rounding swamps
  its increments);
- trial 9: test_runtime_stand_in_refusals.py (a CPU tensor indexed by device indices),
  test_runtime_gpu_dtypes.py (a float16 ``torch.linalg.solve``, ``torch.quantile``),
  test_runtime_causes.py (``clip_grad_norm_(error_if_nonfinite=True)``, a cast named with the op
  it feeds) and test_runtime_placement_names.py (a factory inside a Function's backward);
- trial 10: test_runtime_autocast_policy.py (``norm`` reached from C++ without its defaults:
  ``F.pairwise_distance``) and test_runtime_scaler_order.py (a second ``scaler.unscale_`` or
  ``scaler.step`` before ``scaler.update()``).

CPU only, tiny models, one torch thread."""

import pytest
from conftest import assert_caught_and_named, check_zoo_model, load_runtime_zoo

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: trial -> (at least this many correct architectures, at least this many planted bugs)
SIZES = {"zoo_trial3": (15, 10), "zoo_trial4": (10, 8), "zoo_trial5": (12, 10),
         "zoo_trial6": (12, 6), "zoo_trial7": (12, 10), "zoo_trial8": (12, 7), "zoo_trial9": (19, 9),
         "zoo_trial10": (21, 13)}
ZOOS = {name: load_runtime_zoo(name) for name in SIZES}

#: (trial, case) -> why it still fails (a strict xfail: it must fail, so a fix shows); none now
FAILING = {
}


def _cases(kind):
    out = []
    for name, zoo in ZOOS.items():
        for f in getattr(zoo, kind):
            why = FAILING.get((name, f.__name__))
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param((name, f), marks=marks, id=f"{name}-{f.__name__}"))
    return out


CORRECT = _cases("CORRECT")
PLANTED = _cases("PLANTED")


@pytest.mark.parametrize("name", SIZES)
def test_the_trial_is_large_enough(name):
    correct, planted = SIZES[name]
    assert len(ZOOS[name].CORRECT) >= correct and len(ZOOS[name].PLANTED) >= planted


@pytest.mark.parametrize("case", CORRECT)
def test_correct_model_passes(case):
    r = check_zoo_model(case[1])
    assert r.ok, str(r)


@pytest.mark.parametrize("case", PLANTED)
def test_planted_bug_is_caught_and_named(case):
    name, factory = case
    assert_caught_and_named(check_zoo_model(factory), *ZOOS[name].PLANTED[factory])
