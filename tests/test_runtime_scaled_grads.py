"""A gradient penalty's ``torch.autograd.grad(scaler.scale(...))`` gradients: a step that uses
them without dividing by ``scaler.get_scale()`` is named first (module ``step_fn``, op
``torch.autograd.grad``), before the float16 mismatch it makes; one that divides passes."""

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from devlint.runtime import TrainingStep, check_step  # noqa: E402
from devlint.runtime.scaled_grads import ScaledGrads  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _penalty_step(divide):
    def step_fn(model, batch, optimizer, scaler):
        optimizer.zero_grad()
        x = batch.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(scaler.scale(model(x).sum()), x, create_graph=True)
        if divide:
            g = g / scaler.get_scale()
        loss = model(batch).mean() + ((g.float().norm(dim=1) - 1) ** 2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss
    return step_fn


def _step(divide):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    return TrainingStep(model, torch.randn(12, 8), lambda m, x: m(x).mean(), lambda p: torch.optim.Adam(p, lr=1e-3),
                        step_fn=_penalty_step(divide), name=f"penalty_divide_{divide}")


def test_scaled_grads_notes_only_outputs_of_an_enabled_scaler():
    x = torch.randn(3, requires_grad=True)
    real_grad, real_scale = torch.autograd.grad, torch.amp.GradScaler.scale
    with ScaledGrads() as seen:
        torch.autograd.grad((x * 2).sum(), x)
        assert not seen.used
        torch.autograd.grad(torch.amp.GradScaler("cpu", enabled=False).scale((x * 2).sum()), x)
        assert not seen.used
        torch.autograd.grad(torch.amp.GradScaler("cpu").scale((x * 2).sum()), x)
        assert seen.used
    assert torch.autograd.grad is real_grad and torch.amp.GradScaler.scale is real_scale


def test_undivided_penalty_gradients_are_named_first():
    r = check_step(_step(False), devices=["cpu"])
    assert not r.ok
    first = r.errors[0]
    assert (first.kind, first.module, first.op) == ("mismatch", "step_fn (the training step)",
                                                    "torch.autograd.grad"), str(r)


def test_divided_penalty_gradients_pass():
    r = check_step(_step(True), devices=["cpu"])
    assert r.ok, str(r)
