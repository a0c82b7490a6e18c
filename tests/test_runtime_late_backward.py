"""A backward of a scaled loss after ``scaler.unscale_`` and before ``scaler.step`` (an
auxiliary loss added after clipping) leaves that part of the gradients multiplied by the loss
scale: the mismatch it makes is named as that, at the step, not at the module it reached."""

import warnings

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F
from torch import nn

from devlint.runtime import TrainingStep, check_step
from devlint.runtime.grad_edits import GradEdits


def _loss(model, batch):
    return F.cross_entropy(model(batch[0]), batch[1])


def _aux_late(model, batch, optimizer, scaler):
    loss = _loss(model, batch)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    scaler.scale(0.01 * model[0].weight.float().square().sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


def test_scaled_backward_after_unscale_is_named():
    step = TrainingStep(_model(), (torch.randn(8, 6), torch.randint(0, 3, (8,))), _loss,
                        lambda p: torch.optim.SGD(p, lr=0.01), step_fn=_aux_late)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        r = check_step(step, devices=["cpu"])
    f = r.errors[0]
    assert (f.kind, f.module, f.op, f.name) == ("mismatch", "step_fn (the training step)",
                                                 "GradScaler.unscale_", "0.weight"), str(r)


def test_a_backward_after_the_step_is_not_late():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    edits = GradEdits(model, scaler)
    try:
        for _ in range(2):  # two whole steps in one step_fn
            scaler.scale(_loss(model, (torch.randn(4, 6), torch.randint(0, 3, (4,))))).backward()
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        assert edits.late == []
        scaler.scale(_loss(model, (torch.randn(4, 6), torch.randint(0, 3, (4,))))).backward()
        scaler.unscale_(opt)
        scaler.scale(model[2].bias.sum()).backward()
        assert edits.late == ["2.bias"]
    finally:
        edits.close()
    assert "step" not in scaler.__dict__ and "update" not in scaler.__dict__
