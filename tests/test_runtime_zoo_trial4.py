"""A fourth fresh trial (fixtures/runtime/zoo_trial4.py; its architectures and planted bugs are
run by test_runtime_fresh_trials.py): the general causes it found, each tested alone. A
GradScaler made anew on every call of the step, a backward of a loss the scaler never scaled
(gradient accumulation), ``.tolist()`` on the stand-in GPU, an overflow in a convolution
computed in float32 and rounded named at the convolution. CPU only, tiny models."""

import pytest
from conftest import check_zoo_model, load_runtime_zoo

torch = pytest.importorskip("torch")

from devlint.runtime import TrainingStep, autocast_policy  # noqa: E402
from devlint.runtime.grad_edits import GradEdits  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

zoo = load_runtime_zoo("zoo_trial4")
F = torch.nn.functional


_report = check_zoo_model


# --- a GradScaler made on every call ------------------------------------------------------


def _tabular(weight=30.0):
    g = torch.Generator().manual_seed(7)
    model = zoo.Tabular()
    with torch.no_grad():
        model.net[4].weight.mul_(weight)
    return model, (torch.randn(8, 10, generator=g) * 4, torch.randint(0, 3, (8,), generator=g))


KEPT = {}


def _kept_scaler_step(model, batch, optimizer, scaler):
    # made once on the first call and kept in a module dict: the same scaler every step
    own = KEPT.setdefault(id(model), torch.amp.GradScaler("cuda"))
    x, y = batch
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    own.scale(loss).backward()
    own.step(optimizer)
    own.update()
    return loss


def _on_model_step(model, batch, optimizer, scaler):
    if not hasattr(model, "scaler"):
        model.scaler = torch.amp.GradScaler("cuda")  # kept on the model
    x, y = batch
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    model.scaler.scale(loss).backward()
    model.scaler.step(optimizer)
    model.scaler.update()
    return loss


@pytest.mark.parametrize("step_fn", [_kept_scaler_step, _on_model_step], ids=["module dict", "model attribute"])
def test_a_scaler_made_once_and_kept_is_not_a_fresh_scaler(step_fn):
    model, batch = _tabular()
    r = _report(lambda: TrainingStep(model, batch, zoo._classify, zoo._sgd, step_fn=step_fn))
    KEPT.clear()
    assert r.ok and not [f for f in r.findings if f.op == "GradScaler.__init__"], str(r)
    assert [x.skipped_steps for x in r.runs if x.mode == "float16"] == [4]  # the same overflow


def test_a_fresh_scaler_that_never_overflows_is_said_not_failed():
    model, batch = _tabular(weight=1.0)
    r = _report(lambda: TrainingStep(model, batch, zoo._classify, zoo._sgd, step_fn=zoo._fresh_scaler_step))
    said = [f for f in r.findings if f.op == "GradScaler.__init__"]
    assert r.ok and [(f.severity, f.module) for f in said] == [("info", "step_fn (the training step)")], str(r)


def _fresh_small_scaler_step(model, batch, optimizer, scaler):
    own = torch.amp.GradScaler("cuda", init_scale=1024.0)  # made anew, at the step's own scale
    x, y = batch
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    own.scale(loss).backward()
    own.step(optimizer)
    own.update()
    return loss


def test_a_fresh_scaler_is_said_at_its_own_initial_scale():
    model, batch = _tabular(weight=1.0)
    r = _report(lambda: TrainingStep(model, batch, zoo._classify, zoo._sgd, step_fn=_fresh_small_scaler_step))
    said = [f.message for f in r.findings if f.op == "GradScaler.__init__"]
    assert len(said) == 1 and "restarts at 1024 each step" in said[0], str(r)


def test_the_built_in_step_never_has_a_fresh_scaler():
    # devlint's own scaler, made again while it settles the scale, is not the step's
    model, batch = _tabular()
    r = _report(lambda: TrainingStep(model, batch, zoo._classify, zoo._sgd))
    assert r.ok and not [f for f in r.findings if f.op == "GradScaler.__init__"], str(r)
    assert [x.skipped_steps for x in r.runs if x.mode == "float16"] == [4]


# --- unscaled backward passes ---------------------------------------------------------------


def _unscaled_parts(order):
    m = torch.nn.Linear(3, 2)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    edits = GradEdits(m, scaler)
    try:
        for how in order:
            loss = m(torch.randn(4, 3)).pow(2).mean()
            if how == "plain":
                loss.backward()
            elif how == "scaled":
                scaler.scale(loss).backward()
            elif how == "sum":  # two scaled losses added
                (scaler.scale(loss) + scaler.scale(m.weight.sum())).backward()
            else:
                opt.zero_grad(set_to_none=how == "none")
        scaler.step(opt)
        scaler.update()
    finally:
        edits.close()
    assert "scale" not in scaler.__dict__ and torch.autograd.backward is edits._real_backward
    return sorted(edits.unscaled)


@pytest.mark.parametrize("order, unscaled", [
    (["plain", "scaled"], ["bias", "weight"]),
    (["scaled", "plain"], ["bias", "weight"]),
    (["plain", "scaled", "scaled"], ["bias", "weight"]),
    (["scaled", "scaled"], []),
    (["sum", "scaled"], []),
    # a gradient taken for something else (input saliency), then zero_grad: nothing left of it
    (["plain", "none", "scaled"], []),
    (["plain", "zero", "scaled"], []),
])
def test_gradients_of_an_unscaled_backward_are_listed(order, unscaled):
    assert _unscaled_parts(order) == unscaled


# --- the stand-in GPU and widened convolutions -----------------------------------------------


def test_tolist_on_the_stand_in_reads_the_data():
    from devlint.runtime import standin

    t = standin.Tagged(torch.tensor([1.0, 2.5]))
    assert t.device.type == standin.STAND_IN and t.tolist() == [1.0, 2.5]


def test_the_rounding_of_a_widened_convolution_is_named_after_it():
    x = torch.full((1, 1, 8), 300.0)
    w = torch.full((2, 1, 4), 100.0)
    with autocast_policy.policy("cuda"), autocast_policy.float32_convolutions(), \
            torch.autocast("cpu", dtype=torch.float16):
        out = F.conv1d(x, w)
        wide, refs = autocast_policy._WIDENED.get()
        assert out.dtype == torch.float16 and not torch.isfinite(out).any()
        assert wide == "aten::conv1d" and len(refs) == 1
    assert autocast_policy.widened(out) is None  # the rounded output is not the float32 one


# --- the scaler's protocol in an accumulation ------------------------------------------------


def _accumulate(kind):
    def step_fn(model, batch, optimizer, scaler, micro=2):
        x, y = batch
        optimizer.zero_grad()
        for xs, ys in zip(x.chunk(micro), y.chunk(micro)):
            loss = F.cross_entropy(model(xs), ys) / micro
            if kind == "never scaled":
                loss.backward()
            else:
                scaler.scale(loss).backward()
            if kind == "unscale_ each":
                scaler.unscale_(optimizer)
            if kind == "update each":
                scaler.update()
        scaler.step(optimizer)
        scaler.update()
        return loss
    return step_fn


@pytest.mark.parametrize("kind, op, words", [
    ("never scaled", "GradScaler.scale", "never scaler.scale(loss)"),
    ("unscale_ each", "GradScaler.unscale_", "scaler.unscale_(optimizer) again"),
    ("update each", "GradScaler.step", "scaler.update() before any scaler.step"),
])
def test_an_accumulation_that_misuses_the_scaler_is_named(kind, op, words):
    r = _report(lambda: TrainingStep(zoo.Tabular(), (torch.randn(8, 10), torch.randint(0, 3, (8,))),
                                     zoo._classify, zoo._sgd, step_fn=_accumulate(kind)), modes=["float16"])
    assert [(f.kind, f.op, f.module) for f in r.errors] == [("step-error", op, "step_fn (the training step)")], str(r)
    assert words in r.errors[0].message


def test_an_accumulation_that_scales_every_loss_passes():
    r = _report(lambda: TrainingStep(zoo.Tabular(), (torch.randn(8, 10), torch.randint(0, 3, (8,))),
                                     zoo._classify, zoo._sgd, step_fn=_accumulate("right")))
    assert r.ok and not r.findings, str(r)
