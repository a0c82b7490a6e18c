"""Code that branches on CUDA takes the GPU's branch on the stand-in device
(devlint/runtime/cuda_branch.py): a correct model is not flagged, a bug on that branch is."""

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from devlint.runtime import check_step, standin  # noqa: E402
from devlint.runtime.cuda_branch import FACTORIES, cuda_branch  # noqa: E402

STEPS = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "steps.py"
_spec = importlib.util.spec_from_file_location("devlint_runtime_fixture_steps_cuda", STEPS)
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)
CUDA = torch.cuda.is_available()


def _placement(report):
    return [f for f in report.findings if f.kind == "device-placement"]


def _patched_names():
    return {n: torch.__dict__[n] for n in FACTORIES if n in torch.__dict__}, \
        {n: torch.Tensor.__dict__.get(n) for n in ("to", "cuda", "new_zeros", "new_tensor")}


def test_is_cuda_branch_is_not_flagged_and_runs_take_their_own_branch():
    torch.manual_seed(0)
    step = steps.cuda_branch_mask()
    steps.CudaBranchMask.seen.clear()
    before = _patched_names()
    r = check_step(step, devices=["cpu"])
    assert r.ok, str(r)
    assert not _placement(r) and not [f for f in r.findings if f.kind == "probe-incomplete"]
    # the stand-in run took the CUDA branch; the plain low-precision runs the CPU's
    seen = steps.CudaBranchMask.seen
    assert (True, "Tagged") in seen and (False, "Tensor") in seen
    assert all(cuda == (kind == "Tagged") for cuda, kind in seen), seen
    assert _patched_names() == before and "is_cuda" not in standin.Tagged.__dict__


def test_the_run_sees_cuda_on_tagged_tensors_only():
    model = steps.CudaBranchMask()
    steps.CudaBranchMask.seen.clear()
    x = torch.randn(4, 10)
    with standin.stand_in(model) as (mode, _):
        standin.to_stand_in(model)
        out = model(x.to(standin.STAND_IN))
        assert type(out) is standin.Tagged and not x.is_cuda
        assert type(torch.ones(2).cuda()) is standin.Tagged
        assert type(torch.ones(2).to(device="cuda:0")) is standin.Tagged
        assert type(torch.zeros(2, device=torch.device("cuda"))) is standin.Tagged
        assert type(torch.tensor([1.0], device="cuda")) is standin.Tagged
        assert torch.ones(2).to(torch.float64).dtype == torch.float64  # other .to calls unchanged
    assert steps.CudaBranchMask.seen == [(True, "Tagged")]
    assert not mode.mixes, mode.mixes


def test_a_cpu_tensor_left_on_the_gpu_branch_is_caught():
    torch.manual_seed(0)
    r = check_step(steps.cuda_branch_forgets(), devices=["cpu"])
    (f,) = _placement(r)
    assert f.module == "CudaBranchForgets (the model itself)" and f.related == "DEV112", f
    assert "aten.full" in f.name and f.op == "aten.mul.Tensor"
    assert not r.ok


def test_everything_is_restored_when_the_block_raises():
    before = _patched_names()
    with pytest.raises(ValueError), cuda_branch(standin.Tagged, standin.STAND_IN):
        assert torch.Tensor.__dict__.get("to") is not None and torch.zeros is not before[0]["zeros"]
        raise ValueError("the step failed")
    assert _patched_names() == before and "is_cuda" not in standin.Tagged.__dict__
    assert standin.Tagged(torch.ones(1)).is_cuda is False


@pytest.mark.skipif(CUDA, reason="checks a CPU-only torch")
def test_cuda_calls_outside_the_run_still_raise():
    check_step(steps.cuda_branch_mask(), devices=["cpu"])
    with pytest.raises((AssertionError, RuntimeError), match="CUDA"):
        torch.ones(1).cuda()
    with pytest.raises((AssertionError, RuntimeError), match="CUDA"):
        torch.zeros(1, device="cuda")
