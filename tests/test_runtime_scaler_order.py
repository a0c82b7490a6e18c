"""A step that steps its optimizer twice between two ``scaler.update()`` calls (PPO's epochs
of minibatches with one update per rollout): GradScaler raises in the float16 run, and the
finding names the GradScaler call that raised and the missing ``update()``
(:mod:`devlint.runtime.scaler_order`). The same step with ``update()`` after every
``scaler.step`` passes. CPU only, one tiny model."""

import pytest
from conftest import tiny_batch, tiny_sgd

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _two_steps(update_each, unscale):
    def step_fn(model, batch, optimizer, scaler):
        x, y = batch
        for half in (slice(0, 4), slice(4, 8)):
            loss = torch.nn.functional.cross_entropy(model(x[half]).float(), y[half])
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if unscale:
                scaler.unscale_(optimizer)
            scaler.step(optimizer)
            if update_each:
                scaler.update()
        if not update_each:
            scaler.update()
        return loss
    return step_fn


def _check(update_each, unscale):
    from devlint.runtime import TrainingStep, check_step

    torch.manual_seed(0)
    step = TrainingStep(torch.nn.Linear(6, 3), tiny_batch(), lambda m, b: m(b[0]).sum(), tiny_sgd,
                        step_fn=_two_steps(update_each, unscale))
    return check_step(step, devices=["cpu"])


@pytest.mark.parametrize("unscale, op", [(True, "GradScaler.unscale_"), (False, "GradScaler.step")])
def test_a_second_scaler_step_before_update_is_named(unscale, op):
    r = _check(update_each=False, unscale=unscale)
    assert not r.ok
    f = r.errors[0]
    assert (f.kind, f.op, f.module) == ("step-error", op, "step_fn (the training step)"), str(r)
    assert "no scaler.update() between" in f.message and "after every scaler.step" in f.fix
    assert f.related == "DEV204"  # the static rule of a step without its update, not DEV203's bypass


@pytest.mark.parametrize("unscale", [True, False])
def test_an_update_after_every_scaler_step_passes(unscale):
    assert _check(update_each=True, unscale=unscale).ok
