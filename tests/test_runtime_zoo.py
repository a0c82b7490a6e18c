"""The runtime checker on real architectures: every correct model passes, every planted bug is
caught and named (fixtures/runtime/zoo.py), with native and with emulated CPU low-precision GEMMs.
CPU only; tiny configs keep this to ~4 minutes."""

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from devlint.runtime import check_step  # noqa: E402

ZOO = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "zoo.py"
_spec = importlib.util.spec_from_file_location("devlint_runtime_zoo", ZOO)
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)


def _report(factory, kernels="auto"):
    torch.manual_seed(0)
    return check_step(factory(), devices=["cpu"], cpu_kernels=kernels)


#: "native" runs the CI-sized zoo on PyTorch's CPU kernels; "emulated" checks that float32-
#: accumulating GEMMs/convolutions (devlint.runtime.emulate) give the same verdicts ("auto"
#: picks one of the two per model, tests/test_runtime_cost.py).
KERNELS = ["native", "emulated"]


def test_the_zoo_is_large_enough():
    hf = [f for f in zoo.CORRECT if f.__name__.startswith("hf_")]
    assert len({f.__name__.replace("_padded", "") for f in hf}) >= 8
    assert len(zoo.PLANTED) >= 13 and set(SAYS) <= {f.__name__ for f in zoo.PLANTED}


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("factory", zoo.CORRECT, ids=lambda f: f.__name__)
def test_correct_model_passes(factory, kernels):
    r = _report(factory, kernels)
    assert r.cpu_kernels == kernels
    assert r.ok, str(r)
    rows = {run.mode: run for run in r.runs if run.device == "cpu"}
    assert [rows[m].status for m in ("float32", "bfloat16", "float16")] == ["reference", "ok", "ok"]
    assert rows["float16"].skipped_steps is not None and rows["float16"].skipped_steps <= 8
    assert not [f for f in r.findings if f.kind == "probe-incomplete"]


#: What else a planted bug's finding must say: (its op, words of its message).
SAYS = {
    "gpt_inplace_overflow": ("aten.mul_.Tensor", "(in place: it overwrites its input)"),
    "mlp_fp16_running_var": ("aten.var.correction", "buffer norm.running_var of norm (RunningNorm)"),
    "gpt_custom_function": ("FusedLinearFn.backward", "a custom torch.autograd.Function"),
    "gpt_missing_scaler_update": ("GradScaler.update", "never scaler.update()"),
    "transformer_mask_attribute": ("Transformer(tgt_mask=)", "tensor attribute causal"),
}


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("factory", list(zoo.PLANTED), ids=lambda f: f.__name__)
def test_planted_bug_is_caught_and_named(factory, kernels):
    kind, module, name = zoo.PLANTED[factory]
    r = _report(factory, kernels)
    assert not r.ok
    found = [f for f in r.errors if f.kind == kind]
    assert found, str(r)
    assert any(f.module == module for f in found), [f.module for f in found]
    if name is not None:
        assert any(name in (f.name or "") for f in found), [f.name for f in found]
    if factory.__name__ in SAYS:
        op, words = SAYS[factory.__name__]
        assert any(f.op == op and words in f.message for f in found), str(r)
        assert "never called optimizer.step()" not in str(r)
    if kind == "device-placement":
        # only the planted problem: the numerics of the model are fine
        assert {f.kind for f in r.errors} == {"device-placement"}, str(r)


@pytest.mark.parametrize("kernels", KERNELS)
def test_unstable_module_is_named_and_bfloat16_is_not_called_clean(kernels):
    r = _report(zoo.gpt_bf16_unstable, kernels)
    # under CUDA's autocast rules rsqrt runs in float32, so float16 mismatches (named) too
    (mm,) = [f for f in r.findings if f.kind == "mismatch" and f.mode == "bfloat16"]
    assert "NaiveNorm" in mm.message
    assert mm.details["floor"] < 0.05 < mm.details["grad_err"]
    assert all("bfloat16 runs clean" not in f.message for f in r.findings)


@pytest.mark.parametrize("kernels", KERNELS)
def test_fp16_overflow_names_the_op_and_bfloat16_is_clean(kernels):
    r = _report(zoo.gpt_fp16_overflow, kernels)
    (f,) = [f for f in r.findings if f.kind == "non-finite"]
    assert f.op == "aten.mul.Tensor" and "bfloat16 runs clean" in f.message
    assert next(run for run in r.runs if run.mode == "bfloat16").status == "ok"


def test_tied_weights_stay_tied_on_the_stand_in():
    r = _report(zoo.hf_gpt2)
    assert r.ok and not r.notes, str(r)


def test_stand_in_reference_equals_a_plain_cpu_step():
    from devlint.runtime import replay

    torch.manual_seed(0)
    step = zoo.hf_bert()  # dropout on: the stand-in must draw the same masks
    a = replay.run_once(step, "cpu", "float32", 0, keep=True, stand_in=True)
    b = replay.run_once(step, "cpu", "float32", 0, keep=True)
    assert a.error is None and b.error is None
    assert a.loss == b.loss and a.rng_used
    assert all(torch.equal(a.grads[n], b.grads[n]) for n in b.grads if b.grads[n] is not None)
