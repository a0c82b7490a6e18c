"""Whose autocast rules the CPU runs follow (fixtures/runtime/zoo_policy.py): under CUDA's rules
(the default) correct models pass and the float16 ``mv`` overflow is caught and named at
``mv``; under CPU autocast's own rules the models that only fail there are flagged, and every
low-precision row says which rules and kernels it used. CPU only, tiny models."""

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

from devlint.runtime import check_step  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "devlint_runtime_zoo_policy", Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "zoo_policy.py")
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)


def _report(factory, policy="cuda"):
    torch.manual_seed(0)
    return check_step(factory(), devices=["cpu"], autocast_policy=policy)


@pytest.mark.parametrize("factory", zoo.CORRECT, ids=lambda f: f.__name__)
def test_correct_model_passes_under_cuda_rules(factory):
    r = _report(factory)
    assert r.ok, str(r)
    low = [run for run in r.runs if run.mode in ("bfloat16", "float16")]
    assert [run.status for run in low] == ["ok", "ok"]
    assert {(run.policy, run.kernels) for run in low} == {("cuda", r.cpu_kernels)}
    assert r.autocast_policy == "cuda" and "cuda/" in str(r)


@pytest.mark.parametrize("factory", list(zoo.CPU_RULES_ONLY), ids=lambda f: f.__name__)
def test_flagged_under_cpu_rules_only(factory):
    kind, module = zoo.CPU_RULES_ONLY[factory]
    r = _report(factory, "cpu")
    assert not r.ok
    assert any(f.kind == kind and f.module == module for f in r.errors), str(r)
    assert {run.policy for run in r.runs if run.mode != "float32"} == {"cpu"}
    assert "cpu/" in str(r) and "as CPU autocast does" in str(r)


@pytest.mark.parametrize("factory", list(zoo.PLANTED), ids=lambda f: f.__name__)
def test_planted_bug_is_caught_and_named_at_its_op(factory):
    kind, module, op = zoo.PLANTED[factory]
    r = _report(factory)
    found = [f for f in r.errors if f.kind == kind]
    assert found and found[0].module == module and found[0].op == op, str(r)
    assert found[0].mode == "float16" and "bfloat16 runs clean" in found[0].message


def test_unknown_policy_is_a_value_error():
    with pytest.raises(ValueError, match="autocast policy"):
        _report(zoo.lstm_mv_pooling, "tpu")


def test_a_running_mean_that_is_zero_in_float32_is_measured_in_units_of_its_std():
    """EfficientNet's BatchNorm after a bias-free 1x1 convolution of a BatchNorm's output has a
    running mean of ~1e-10 in float32; bfloat16's ~1e-5 there is no error worth a finding."""
    from devlint.runtime.buffers import measure_state

    before = {"bn.running_mean": torch.zeros(4), "bn.running_var": torch.ones(4), "ema": torch.zeros(4)}
    ref = {"bn.running_mean": torch.full((4,), 1e-10), "bn.running_var": torch.full((4,), 0.9),
           "ema": torch.full((4,), 1e-10)}
    run = [("bn.running_mean", torch.full((4,), 1e-5)), ("ema", torch.full((4,), 1e-5))]
    errors = measure_state(ref, before, run)
    assert errors["bn.running_mean"].error < 2e-5  # 1e-5 against a std of ~0.95
    assert errors["ema"].error > 1e4  # any other buffer: relative to its own reference
