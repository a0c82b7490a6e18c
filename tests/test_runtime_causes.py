"""check_step names the cause: buffers after the step, in-place overflows, a GradScaler never
updated, a custom autograd Function that raises, masks handed to torch's attention modules,
and findings listed cause first. Tiny models, CPU only."""

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from devlint.runtime import Tolerances, TrainingStep, check_step  # noqa: E402
from devlint.runtime.buffers import judge_state, measure_state  # noqa: E402
from devlint.runtime.explain import cause_first  # noqa: E402
from devlint.runtime.report import Finding  # noqa: E402


def _ce(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


def _sgd(params):
    return torch.optim.SGD(params, lr=0.1)


def _step(model, x, **kw):
    return TrainingStep(model, (x, torch.randint(0, 3, (x.shape[0],))), _ce, _sgd, **kw)


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)


# ----------------------------------------------------------------------------- buffers


def test_measure_state_counts_what_went_non_finite_and_skips_equal_buffers():
    before = {"bn.running_var": torch.ones(4), "bn.num_batches_tracked": torch.tensor(0),
              "mask": torch.tensor([0.0, float("-inf")])}
    ref = {"bn.running_var": torch.tensor([2.0, 2.0, 2.0, 2.0]), "bn.num_batches_tracked": torch.tensor(1)}
    run = [("bn.running_var", torch.tensor([2.0, float("inf"), 2.0, 2.002])),
           ("bn.num_batches_tracked", torch.tensor(1)), ("mask", torch.tensor([0.0, float("-inf")]))]
    errs = measure_state(ref, before, run)
    assert set(errs) == {"bn.running_var"}  # equal counters and an unchanged -inf mask are fine
    e = errs["bn.running_var"]
    assert e.nonfinite == 1 and e.error == pytest.approx(0.002 / 2 / 3 ** 0.5, rel=1e-3)
    assert judge_state(errs, "float16", Tolerances()) == []  # non-finite: a finding of its own


def test_judge_state_uses_the_quick_bound_then_the_floor():
    tol = Tolerances()
    ref = {"b": torch.ones(100)}
    before = {"b": torch.zeros(100)}
    small = measure_state(ref, before, [("b", torch.ones(100) * (1 + 2 ** -11))])
    assert judge_state(small, "float16", tol) == []
    big = measure_state(ref, before, [("b", torch.ones(100) * 1.1)])
    assert [n for n, *_ in judge_state(big, "float16", tol)] == ["b"]  # needs a floor
    floor = measure_state(ref, before, [("b", torch.ones(100) * 1.01)])
    assert judge_state(big, "float16", tol, floor) == []  # 0.1 <= 24 x 0.01
    assert [n for n, *_ in judge_state(big, "float16", tol, {})] == ["b"]  # the floor run kept it exact
    counter = measure_state({"n": torch.tensor(2)}, {"n": torch.tensor(0)}, [("n", torch.tensor(1))])
    assert counter["n"].exact and [n for n, *_ in judge_state(counter, "float16", tol, {})] == ["n"]


class HalfStats(nn.Module):
    """A BatchNorm kept in float16 (buffers too) on features of scale 1e3: its running variance
    passes 65504 and becomes inf in every run, the float32 one included."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8)
        self.bn = nn.BatchNorm1d(8, affine=False).half()
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.bn(self.fc(x).half()).float())


def test_a_buffer_that_becomes_inf_in_float32_is_named_with_its_module():
    r = check_step(_step(HalfStats(), torch.randn(8, 6) * 5000), devices=["cpu"], modes=["float32"])
    (f,) = r.errors
    assert (f.kind, f.name, f.module, f.mode) == ("non-finite", "bn.running_var", "bn (BatchNorm1d)", "float32")
    assert "inf/NaN after the float32 step" in f.message


class LazyMask(nn.Module):
    """Fills a preallocated causal-mask buffer with -inf in its first forward (on purpose)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.register_buffer("mask", torch.zeros(3, 3))

    def forward(self, x):
        if not bool(self.mask.any()):
            self.mask.copy_(torch.full((3, 3), float("-inf")).triu(1))
        return self.fc(x) + self.mask.softmax(-1)[1]


def test_a_mask_buffer_filled_with_minus_inf_on_purpose_is_not_a_finding():
    r = check_step(_step(LazyMask(), torch.randn(4, 6)), devices=["cpu"], modes=["float32"])
    assert r.ok, str(r)


class CancellingStats(nn.Module):
    """Keeps a running variance as E[y^2] - E[y]^2 of ``y = h + 100`` in h's own dtype:
    bfloat16 holds y to 0.5, so the variance cancels away; the output does not use it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8)
        self.register_buffer("running_var", torch.ones(8))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = self.fc(x)
        with torch.no_grad():
            y = h + 100.0
            var = (y * y).mean(0) - y.mean(0) * y.mean(0)  # bug: cancellation in h's dtype
            self.running_var.copy_(var.float())
        return self.head(F.relu(h))


def test_a_buffer_beyond_the_noise_floor_is_a_mismatch_naming_it():
    r = check_step(_step(CancellingStats(), torch.randn(16, 6)), devices=["cpu"], modes=["bfloat16"])
    found = [f for f in r.errors if f.name == "running_var"]
    assert found and found[0].kind == "mismatch" and found[0].module == "CancellingStats (the model itself)", str(r)
    assert next(run for run in r.runs if run.mode == "bfloat16").status == "mismatch"


def test_batchnorm_buffers_of_a_correct_model_pass():
    model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
    r = check_step(_step(model, torch.randn(16, 6) * 3), devices=["cpu"])
    assert r.ok, str(r)


# ----------------------------------------------------------------------------- causes


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = self.fc(x)
        h.mul_(1e5)  # overflows float16, in place
        return self.head(F.gelu(h) / 1e5)


def test_an_in_place_overflow_is_named_as_in_place():
    r = check_step(_step(InPlace(), torch.randn(4, 6)), devices=["cpu"], modes=["float16"])
    (f,) = r.errors
    assert f.kind == "non-finite" and f.op == "aten.mul_.Tensor" and "in place" in f.message, str(r)


def _no_update(model, batch, optimizer, scaler):
    loss = _ce(model, batch)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    return loss


def _with_update(model, batch, optimizer, scaler):
    loss = _no_update(model, batch, optimizer, scaler)
    scaler.update()
    return loss


def test_a_step_that_never_updates_the_scaler_is_named_so():
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    r = check_step(_step(model, torch.randn(4, 6), step_fn=_no_update), devices=["cpu"], modes=["float16"])
    (f,) = r.errors
    assert f.op == "GradScaler.update" and f.related == "DEV204" and "never scaler.update()" in f.message
    assert "optimizer.step()" not in str(r)
    ok = check_step(_step(model, torch.randn(4, 6), step_fn=_with_update), devices=["cpu"], modes=["float16"])
    assert ok.ok, str(ok)


class Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad[:, :1]  # bug: the wrong shape


class UsesDoubled(nn.Module):
    def forward(self, x):
        return Doubled.apply(x)


def test_an_error_in_a_custom_function_names_the_function_and_its_module():
    model = nn.Sequential(nn.Linear(6, 8), UsesDoubled(), nn.Linear(8, 3))
    r = check_step(_step(model, torch.randn(4, 6)), devices=["cpu"], modes=["float32"])
    (f,) = r.errors
    assert f.kind == "step-error" and f.op == "Doubled.backward" and f.module == "1 (UsesDoubled)", str(r)
    assert "Doubled.backward, a custom torch.autograd.Function" in f.message


class MaxPoolMasked(nn.Module):
    """Masked max pooling with a -1e9 fill: no float16 value, so ``masked_fill`` on the float16
    output of a Linear raises under autocast, as on a GPU (``finite`` uses the dtype's own min)."""

    def __init__(self, finite=False):
        super().__init__()
        self.finite = finite
        self.fc, self.head = nn.Linear(6, 8), nn.Linear(8, 3)

    def forward(self, x):  # (n, elements, 6)
        h = self.fc(x)
        fill = torch.finfo(h.dtype).min if self.finite else -1e9
        return self.head(h.masked_fill(x[..., :1] < -1, fill).amax(1))


def test_a_step_error_of_a_low_precision_run_names_the_op_that_raised():
    x = torch.randn(4, 5, 6)
    r = check_step(_step(MaxPoolMasked(), x), devices=["cpu"], modes=["float16"])
    (f,) = r.errors
    assert f.kind == "step-error" and f.op == "aten.masked_fill.Scalar", str(r)
    assert f.module == "MaxPoolMasked (the model itself)" and "aten.masked_fill.Scalar" in f.message, str(r)
    ok = check_step(_step(MaxPoolMasked(finite=True), x), devices=["cpu"], modes=["float16"])
    assert ok.ok, str(ok)


class EulerSteps(nn.Module):
    """Many small Euler steps ``z = z + dt * f(z)`` of a state kept in the activations' dtype:
    in float16 increments below the state's spacing are rounded away, on a GPU too (``add``
    keeps its inputs' dtype under autocast); ``wide`` keeps the state in float32."""

    def __init__(self, wide=False, steps=250):
        super().__init__()
        self.wide, self.steps = wide, steps
        self.encode, self.f, self.head = nn.Linear(6, 8), nn.Sequential(nn.Linear(8, 8), nn.Tanh()), nn.Linear(8, 3)

    def forward(self, x):
        z = self.encode(x)
        z = z.float() if self.wide else z
        for _ in range(self.steps):
            dz = self.f(z)
            z = z + (dz.float() if self.wide else dz) / self.steps
        return self.head(z)


def test_increments_lost_by_a_low_precision_accumulation_are_named_at_the_add():
    x = torch.randn(16, 6) * 3
    r = check_step(_step(EulerSteps(), x), devices=["cpu"], modes=["float16"])
    (f,) = r.errors
    assert f.kind == "mismatch" and f.op == "aten.add.Tensor", str(r)
    assert f.module == "EulerSteps (the model itself)" and "rounding takes" in f.message, str(r)
    ok = check_step(_step(EulerSteps(wide=True), x), devices=["cpu"], modes=["float16"])
    assert ok.ok, str(ok)


class MaskAttribute(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.embed = nn.Linear(6, 16)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 1)
        self.mask = nn.Transformer.generate_square_subsequent_mask(5)
        if kind == "buffer":
            del self.mask
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(5))
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.enc(self.embed(x), mask=self.mask).mean(1))


@pytest.mark.parametrize("kind", ["attribute", "buffer"])
def test_a_mask_attribute_handed_to_torch_attention_is_a_placement_finding(kind):
    r = check_step(_step(MaskAttribute(kind), torch.randn(2, 5, 6)), devices=["cpu"], modes=["float32"])
    if kind == "buffer":
        assert r.ok, str(r)
        return
    (f,) = r.errors
    assert (f.kind, f.name, f.op) == ("device-placement", "mask", "TransformerEncoder(mask=)"), str(r)
    assert f.module == "enc (TransformerEncoder)"


def test_findings_are_listed_cause_first():
    kinds = ["mismatch", "deprecation", "non-finite", "underflow", "step-error", "mismatch", "master-weights"]
    found = [Finding(k, str(i), "") for i, k in enumerate(kinds)]
    assert [f.kind for f in cause_first(found)] == [
        "master-weights", "step-error", "underflow", "non-finite", "mismatch", "mismatch", "deprecation"]
    assert [f.message for f in cause_first(found) if f.kind == "mismatch"] == ["0", "5"]


# --- clip_grad_norm_(error_if_nonfinite=True) under a GradScaler ----------------------------------


def _clipped_step(strict):
    def step_fn(model, batch, optimizer, scaler):
        optimizer.zero_grad()
        loss = F.mse_loss(model(batch[0]).float(), batch[1])
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=strict)
        scaler.step(optimizer)
        scaler.update()
        return loss

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 6, generator=g)
    target = 50 + torch.randn(8, 2, generator=g)  # gradients of tens: times 65536 beyond float16
    return TrainingStep(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2)), (x, target),
                        lambda m, b: F.mse_loss(m(b[0]).float(), b[1]), _sgd, step_fn=step_fn)


def test_clip_error_if_nonfinite_under_a_scaler_is_named_with_its_fix():
    torch.manual_seed(0)
    r = check_step(_clipped_step(strict=True), devices=["cpu"])
    assert not r.ok and r.errors[0].kind == "step-error", str(r)
    assert r.errors[0].op == "torch.nn.utils.clip_grad_norm_" and r.errors[0].mode == "float16"
    assert "loss scale 65536" in r.errors[0].message and "drop error_if_nonfinite=True" in r.errors[0].fix


def test_clip_without_error_if_nonfinite_passes():
    torch.manual_seed(0)
    r = check_step(_clipped_step(strict=False), devices=["cpu"])
    assert r.ok, str(r)


# --- an overflowing cast is named with the op it was cast for -----------------------------------


class _WideState(nn.Module):
    """A float32 state beyond float16's range read out by a matrix product: autocast casts it
    to float16 for the product (inf), as on a GPU."""

    def __init__(self, batched):
        super().__init__()
        self.lin, self.batched = nn.Linear(6, 3), batched

    def forward(self, x):
        state = torch.exp(self.lin(x).float() + 12)  # float32, up to ~1e6
        if self.batched:
            return (state.unsqueeze(-1) @ state.unsqueeze(1)).sum(-1)
        return state @ torch.eye(3, device=x.device)


@pytest.mark.parametrize("batched,op", [(True, "aten.bmm"), (False, "aten.mm")])
def test_an_overflowing_cast_names_the_op_it_feeds(batched, op):
    torch.manual_seed(0)
    r = check_step(_step(_WideState(batched), torch.randn(8, 6)), devices=["cpu"], modes=["float16"])
    nf = [f for f in r.errors if f.kind == "non-finite"]
    assert nf and nf[0].op == "aten._to_copy.default", str(r)
    assert f"the cast of an operand of {op}" in nf[0].message and nf[0].details["feeds"].startswith(op)
