"""The runtime checker on the wider zoo (fixtures/runtime/zoo_wide.py): architectures beyond
zoo.py pass, and the planted bugs there are caught and named. CPU only; the models in
``zoo_wide.LONG`` run only with ``DEVLINT_ZOO=long``."""

import importlib.util
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

from devlint.runtime import check_step  # noqa: E402

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "runtime"
_spec = importlib.util.spec_from_file_location("devlint_runtime_zoo_wide", HERE / "zoo_wide.py")
zoo_wide = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo_wide)
_spec = importlib.util.spec_from_file_location("devlint_runtime_zoo_for_wide", HERE / "zoo.py")
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)

LONG = os.environ.get("DEVLINT_ZOO") == "long"


def _report(factory):
    torch.manual_seed(0)
    return check_step(factory(), devices=["cpu"])


def _correct():
    skip = [] if LONG else [pytest.mark.skip(reason="slow on CPU: set DEVLINT_ZOO=long")]
    return [pytest.param(f, id=f.__name__, marks=skip if f in zoo_wide.LONG else [])
            for f in zoo_wide.CORRECT]


def test_the_wide_zoo_is_new_and_large_enough():
    names = {f.__name__ for f in zoo_wide.CORRECT}
    assert len(names) >= 20
    assert not names & {f.__name__ for f in zoo.CORRECT}
    assert len(zoo_wide.PLANTED) >= 4


@pytest.mark.parametrize("factory", _correct())
def test_correct_model_passes(factory):
    r = _report(factory)
    assert r.ok, str(r)
    rows = {run.mode: run for run in r.runs if run.device == "cpu"}
    want = ["reference", "ok", "ok"]
    if factory is zoo_wide.hf_fnet:
        # CUDA autocast has no rule for torch.fft, so FNet's FFT gets the projection's
        # bfloat16/float16 output, for which the CPU has no FFT kernel (nor cuFFT for bfloat16)
        want = ["reference", "unsupported", "unsupported"]
    assert [rows[m].status for m in ("float32", "bfloat16", "float16")] == want, str(r)
    assert not [f for f in r.findings if f.severity == "error"], str(r)


@pytest.mark.parametrize("factory", _correct())
def test_stand_in_reference_equals_a_plain_cpu_step(factory):
    """The reference runs on the stand-in GPU: its gradients must be a plain CPU step's (to
    float32 rounding: composite and fused kernels may differ). A lazy conj() view once made
    Meta-style complex rotary embeddings' gradients 70 % wrong there."""
    from devlint.runtime import replay

    torch.manual_seed(0)
    step = factory()
    a = replay.run_once(step, "cpu", "float32", 0, keep=True, stand_in=True)
    b = replay.run_once(step, "cpu", "float32", 0, keep=True)
    assert b.error is None, b.error
    if a.error is not None:  # the stand-in cannot hold sparse gradients
        assert a.error.startswith("StandInUnsupported"), a.error
        return
    num = sum(float((a.grads[n] - g).pow(2).sum()) for n, g in b.grads.items() if g is not None)
    den = sum(float(g.pow(2).sum()) for g in b.grads.values() if g is not None)
    assert abs(a.loss - b.loss) <= 1e-6 * abs(b.loss) and num <= (1e-5) ** 2 * den


@pytest.mark.parametrize("factory", list(zoo_wide.PLANTED), ids=lambda f: f.__name__)
def test_planted_bug_is_caught_and_named(factory):
    kind, module, name = zoo_wide.PLANTED[factory]
    r = _report(factory)
    assert not r.ok
    found = [f for f in r.errors if f.kind == kind]
    assert found, str(r)
    assert any(f.module == module for f in found), [f.module for f in found]
    if name is not None:
        assert any(name in (f.name or "") for f in found), [f.name for f in found]
    if kind == "device-placement":
        assert {f.kind for f in r.errors} == {"device-placement"}, str(r)


@pytest.mark.parametrize("factory", list(zoo_wide.CPU_RULES_ONLY), ids=lambda f: f.__name__)
def test_naive_softmax_overflows_float16_under_cpu_rules_only(factory):
    """exp(s) / exp(s).sum() without the max: CUDA autocast computes exp in float32 (fine on a
    GPU); CPU autocast in float16, where exp overflows once a score passes ~11."""
    kind, module, op = zoo_wide.CPU_RULES_ONLY[factory]
    assert _report(factory).ok
    torch.manual_seed(0)
    r = check_step(factory(), devices=["cpu"], autocast_policy="cpu")
    (f,) = [f for f in r.findings if f.kind == kind]
    assert (f.mode, f.module, f.op) == ("float16", module, op) and "bfloat16 runs clean" in f.message


def test_list_index_on_the_stand_in():
    """``t[..., [0, 2]]`` on a stand-in tensor indexes real data (Falcon's multi-query split)."""
    from devlint.runtime import standin

    x = torch.arange(12.0).view(3, 4)
    with standin.stand_in(torch.nn.Identity()) as (mode, _):
        t = x.to(standin.STAND_IN)
        got = t[:, [0, 2]]
        t[[1], :] = 0.0
        assert isinstance(got, standin.Tagged) and not mode.mixes
    assert torch.equal(got.elem, x[:, [0, 2]])
    assert t.elem[1].eq(0).all()


def test_in_place_transpose_keeps_the_wrapper_shape():
    """nn.GRU(batch_first=True) transposes its output in place inside its C++ kernel."""
    from devlint.runtime import standin

    gru = torch.nn.GRU(4, 4, batch_first=True)
    x = torch.randn(3, 5, 4)
    want, _ = gru(x)
    with standin.stand_in(gru):
        standin.to_stand_in(gru)
        out, _ = gru(x.to(standin.STAND_IN))
        assert out.shape == out.elem.shape == (3, 5, 4) and out.stride() == out.elem.stride()
        flat = out.flatten(0, 1)
    # the stand-in runs GRU's composite kernel, the plain CPU its fused one: equal to rounding
    torch.testing.assert_close(flat.elem, want.flatten(0, 1).detach(), rtol=1e-5, atol=1e-6)


def test_rounding_scales_the_rounding_error():
    from devlint.runtime.compare import Rounding, round_trip

    x = torch.tensor([1.0 + 2.0 ** -12, -3.3, 0.0, float("inf"), 1e5])
    r = round_trip(x, "bfloat16")
    assert torch.equal(round_trip(x, Rounding("bfloat16", 1.0)), r)
    wide = round_trip(x, Rounding("float16", 24.0))
    d = x.to(torch.float16).float() - x
    assert torch.equal(wide[:3], x[:3] + 24 * d[:3])
    assert wide[3] == float("inf") and wide[4] == float("inf")  # beyond float16: inf, as rounding


def test_a_kink_crossed_by_the_wide_floor_is_not_a_mismatch():
    """E beyond k x F but within the error of a k x wider perturbation (a ReLU flip) passes."""
    from devlint.runtime.compare import Errors, ParamError, Tolerances, judge

    def errs(e, loss=1e-6):
        return Errors(loss, {"w": ParamError("w", 100, e, float("nan"), None, 1.0, 0, e * e * 100, 100.0)})

    tol = Tolerances()
    run, floor = errs(5e-2), errs(5e-4)
    assert not judge(run, "float16", tol, floor=floor, adaptive=True).ok  # 100x its floor
    v = judge(run, "float16", tol, floor=floor, adaptive=True, wide_floor=errs(8e-2))
    assert v.ok and "perturbation" in v.how
    assert not judge(run, "float16", tol, floor=floor, adaptive=True, wide_floor=errs(1e-2)).ok


class _NumpyMasked(torch.nn.Module):
    """Drops features with a mask drawn from numpy's global generator (as Wav2Vec2's
    SpecAugment does)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 2)

    def forward(self, x):
        import numpy as np

        keep = torch.from_numpy((np.random.rand(*x.shape) > 0.5).astype("float32")).to(x.device)
        return self.fc(x * keep)


def test_numpy_draws_are_seeded_per_run_and_the_callers_state_is_kept():
    import random

    import numpy as np

    from devlint.runtime import TrainingStep

    torch.manual_seed(0)
    step = TrainingStep(_NumpyMasked(), (torch.randn(16, 8), torch.randint(0, 2, (16,))),
                        lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]),
                        lambda p: torch.optim.SGD(p, lr=0.1))
    np.random.seed(123)
    random.seed(7)
    want_np, want_py = np.random.rand(), random.random()
    np.random.seed(123)
    random.seed(7)
    r = check_step(step, devices=["cpu"])
    assert r.ok, str(r)
    assert all(run.how is None or "no noise-floor run was needed" in run.how for run in r.runs), str(r)
    assert np.random.rand() == want_np and random.random() == want_py


def test_a_hidden_float16_overflow_is_named_in_the_mismatch():
    """HalfRMSNorm squares a float16 activation past 65504 and rsqrt(inf) = 0 hides it: the
    loss and gradients stay finite, so the mismatch itself names the overflowing op."""
    r = _report(zoo_wide.tabular_rmsnorm_fp16_overflow)
    (f,) = [f for f in r.errors if f.kind == "mismatch"]
    assert f.mode == "float16" and "aten.mul" in f.message and "overflows float16" in f.message, f.message
    assert next(run for run in r.runs if run.mode == "bfloat16").status == "ok"


class _ScatterHead(torch.nn.Module):
    """Scatters the previous layer's output into a float32 buffer: under autocast that
    output is bfloat16/float16 and scatter_ raises (Hugging Face BigBird's block-sparse
    attention does the same in transformers 5.23)."""

    def forward(self, x):
        idx = torch.arange(x.shape[1], device=x.device).expand_as(x)
        return torch.zeros(x.shape, device=x.device).scatter_(1, idx, x)


def test_a_step_error_names_the_module_that_raised():
    from devlint.runtime import TrainingStep

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), _ScatterHead())
    step = TrainingStep(model, (torch.randn(4, 8), torch.randint(0, 4, (4,))),
                        lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]),
                        lambda p: torch.optim.SGD(p, lr=0.1))
    r = check_step(step, devices=["cpu"])
    errs = [f for f in r.errors if f.kind == "step-error"]
    assert {f.mode for f in errs} == {"bfloat16", "float16"}, str(r)
    assert all(f.module == "1 (_ScatterHead)" for f in errs), [f.module for f in errs]
    assert all("autocast" in f.message and ".to(x.dtype)" in f.fix for f in errs), str(r)
