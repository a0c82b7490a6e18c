"""A low-precision op that the CPU refuses and a GPU refuses too (``devlint.runtime.gpu_dtypes``):
a float16 ``torch.linalg.solve`` of autocast's output is a step-error naming the function and
module (CUDA has no half-precision solver), not a "not checked here" note; ``torch.quantile`` of
float16 names ``torch.quantile`` and says to call it on float32; the same steps in float32 pass.
CPU only, tiny models."""

import pytest
from conftest import check_zoo_model

torch = pytest.importorskip("torch")

from devlint.runtime import TrainingStep, gpu_dtypes  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F = torch.nn.functional
nn = torch.nn


class _Ridge(nn.Module):
    def __init__(self, float32):
        super().__init__()
        self.embed, self.float32 = nn.Linear(6, 4), float32

    def forward(self, x):
        h = self.embed(x)
        if self.float32:
            with torch.autocast(device_type=h.device.type, enabled=False):
                h = h.float()
                return torch.linalg.solve(h.T @ h + torch.eye(4, device=h.device), h.T).T
        return torch.linalg.solve(h.T @ h + torch.eye(4, device=h.device, dtype=h.dtype), h.T).T


class _Median(nn.Module):
    def __init__(self, float32):
        super().__init__()
        self.lin, self.float32 = nn.Linear(6, 4), float32

    def forward(self, x):
        h = self.lin(x)
        return h - torch.quantile(h.float() if self.float32 else h, 0.5, dim=1, keepdim=True)


def _step(model):
    g = torch.Generator().manual_seed(0)
    batch = torch.randn(8, 6, generator=g), torch.randint(0, 4, (8,), generator=g)
    return lambda: TrainingStep(model, batch, lambda m, b: F.cross_entropy(m(b[0]).float(), b[1]),
                                lambda p: torch.optim.SGD(p, lr=0.1))


def test_a_half_linalg_solve_is_a_step_error_named_at_the_function():
    r = check_zoo_model(_step(_Ridge(float32=False)))
    errors = [f for f in r.errors if f.kind == "step-error"]
    assert not r.ok and {f.mode for f in errors} == {"bfloat16", "float16"}, str(r)
    assert errors[0].op == "torch.linalg.solve" and errors[0].module == "_Ridge (the model itself)"
    assert "fails on a GPU too" in errors[0].message and "float32" in errors[0].fix


def test_linalg_solve_in_float32_under_autocast_passes():
    r = check_zoo_model(_step(_Ridge(float32=True)))
    assert r.ok, str(r)


def test_a_half_quantile_names_torch_quantile_and_says_float32():
    r = check_zoo_model(_step(_Median(float32=False)))
    assert not r.ok and r.errors[0].op == "torch.quantile", str(r)
    assert r.errors[0].fix.startswith("call torch.quantile on float32 inputs")


def test_quantile_of_float32_passes():
    r = check_zoo_model(_step(_Median(float32=True)))
    assert r.ok, str(r)


def test_the_documented_dtypes_come_from_the_installed_torch():
    assert "half" not in gpu_dtypes.documented_dtypes("torch.linalg.solve")
    assert "bfloat16" in gpu_dtypes.documented_dtypes("torch.linalg.matrix_exp")
    assert gpu_dtypes.documented_dtypes("torch.cholesky") == gpu_dtypes.documented_dtypes("torch.linalg.cholesky")
    assert gpu_dtypes.documented_dtypes("torch.nn.functional.linear") is None
