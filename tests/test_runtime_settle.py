"""The GradScaler's scale settled on one forward graph (devlint.runtime.settle) finds what the
replayed bisection found, with the same gradients, at a fraction of the cost."""

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from devlint.runtime import TrainingStep, replay, runs, settle  # noqa: E402


def _step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    # the loss amplifies by 100: scaled gradients pass float16's 65504 above a scale of ~512
    return TrainingStep(model, (torch.randn(6, 8),), lambda m, b: (m(b[0]) * 100).square().mean(),
                        lambda p: torch.optim.SGD(p, lr=1e-3))


def test_settling_on_one_graph_equals_replaying_the_step():
    step = _step()
    ref = replay.run_once(step, "cpu", "float32", 0, keep=True)
    calls = []
    on_graph = settle.on_graph
    try:  # count the searches on one graph: the equality below means nothing if none ran
        settle.on_graph = lambda *a, **k: calls.append(1) or on_graph(*a, **k)
        replayed = runs._settled(step, "cpu", "float16", 0, ref, "native")  # built-in step: on one graph
        searched = len(calls)
        orig = runs.run_once
        try:
            runs.run_once = lambda *a, **k: orig(*a, **{**k, "on_graph": False})
            bisected = runs._settled(step, "cpu", "float16", 0, ref, "native")
        finally:
            runs.run_once = orig
    finally:
        settle.on_graph = on_graph
    assert searched >= 1 and len(calls) == searched  # the replay path never searches on one graph
    assert replayed.skipped_steps == bisected.skipped_steps and 3 <= bisected.skipped_steps <= 12
    assert replayed.scale == bisected.scale and replayed.loss == bisected.loss
    for name, err in bisected.errors.params.items():
        assert replayed.errors.params[name].sq_diff == err.sq_diff, name


def test_on_graph_reports_none_when_every_scale_overflows():
    w = torch.full((4,), 1.0, requires_grad=True)
    loss = (w.half() * 6e4).float().sum() * 1e30  # the float16 backward is inf at any scale
    assert settle.on_graph(loss, [w], 2.0 ** 16, 24) is None
    assert settle.on_graph(w.sum(), [w], 2.0 ** 16, 24) == 0 and torch.equal(w.grad, torch.full((4,), 2.0 ** 16))


class _Checkpointed(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.a, self.b, self.reentrant = nn.Linear(8, 16), nn.Linear(16, 4), reentrant

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        return self.b(checkpoint(lambda h: torch.relu(self.a(h)), x, use_reentrant=self.reentrant))


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_models_settle_as_when_replayed(reentrant):
    torch.manual_seed(0)
    step = TrainingStep(_Checkpointed(reentrant), (torch.randn(6, 8, requires_grad=reentrant),),
                        lambda m, b: (m(b[0]) * 100).square().mean(), lambda p: torch.optim.SGD(p, lr=1e-3))
    ref = replay.run_once(step, "cpu", "float32", 0, keep=True)
    raw = runs._settled(step, "cpu", "float16", 0, ref, "native")
    assert raw.error is None and raw.errors is not None and 3 <= raw.skipped_steps <= 12


@pytest.mark.parametrize("hint", [0, 1, 3, 7, 8, 9, 20, 24, 30])
@pytest.mark.parametrize("answer", [0, 1, 5, 8, 24, None])
def test_least_finite_finds_the_bisection_answer_from_any_hint(answer, hint):
    calls = []

    def finite(k):
        calls.append(k)
        return answer is not None and k >= answer

    assert settle.least_finite(finite, 24, hint) == answer
    assert len(calls) - (calls[-1] in calls[:-1]) == len(set(calls))  # one try per k (the last may be redone)
    if answer is not None:
        assert calls[-1] == answer  # the caller's gradients are the answer's
    if answer is not None and hint == answer:
        assert len(calls) == (2 if answer else 1)  # a right guess: hint - 1 overflows, hint does not


def test_the_hint_is_where_the_largest_reference_gradient_fits_float16():
    assert settle.hint(0.5, 2.0 ** 16) == 0  # 32768 < 65504
    assert settle.hint(1.0, 2.0 ** 16) == 1  # 65536 overflows, 32768 does not
    assert settle.hint(37.4, 2.0 ** 16) == 6
    assert settle.hint(float("inf"), 2.0 ** 16) == 0 and settle.hint(0.0, 2.0 ** 16) == 0


def test_a_replayed_search_starts_at_the_hint(monkeypatch):
    step = _step()
    ref = replay.run_once(step, "cpu", "float32", 0, keep=True)
    base = runs.run_once(step, "cpu", "float16", 0, ref=ref, kernels="native", on_graph=False)
    assert base.skipped_steps == 1  # the first scale overflows: a search follows
    scales = []
    orig = runs.run_once

    def counted(*a, **k):
        scales.append(k.get("init_scale", replay.INIT_SCALE))
        return orig(*a, **{**k, "on_graph": False})

    monkeypatch.setattr(runs, "run_once", counted)
    raw = runs._settled(step, "cpu", "float16", 0, ref, "native")
    k = raw.skipped_steps
    assert settle.hint(runs._grad_max(ref), replay.INIT_SCALE) == k  # the guess is right here
    assert scales == [2.0 ** 16, 2.0 ** 16 / 2 ** (k - 1), 2.0 ** 16 / 2 ** k]  # not a bisection's 5-6 tries
