"""What keeps a check cheap without changing its verdict: CPU low-precision GEMMs computed in
float32 (devlint.runtime.emulate), one model copy restored between runs, chunked comparisons."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from devlint.runtime import TrainingStep, check_step  # noqa: E402
from devlint.runtime import replay, runs, workcopy  # noqa: E402
from devlint.runtime.compare import CHUNK, Delta, Rounding, _deltas, measure  # noqa: E402
from devlint.runtime.emulate import Float32Accumulate, Float32GEMMs, cpu_kernels, resolve  # noqa: E402

ZOO = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "zoo.py"


def _zoo():
    spec = importlib.util.spec_from_file_location("devlint_runtime_zoo_cost", ZOO)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_emulated_matmul_is_float32_accumulation_rounded_once(dtype):
    torch.manual_seed(0)
    a, b = torch.randn(64, 300).to(dtype), torch.randn(300, 32).to(dtype)
    bias = torch.randn(32).to(dtype)
    with Float32Accumulate() as mode:
        mm, addmm = a @ b, torch.addmm(bias, a, b)
        x32 = torch.randn(4, 4) @ torch.randn(4, 4)  # float32: untouched
        s = a.sum()  # not a GEMM: the native low-precision kernel
    assert mode.ops == 2 and mm.dtype == addmm.dtype == s.dtype == dtype and x32.dtype == torch.float32
    assert torch.equal(mm, (a.float() @ b.float()).to(dtype))
    assert torch.equal(addmm, torch.addmm(bias.float(), a.float(), b.float()).to(dtype))
    with Float32Accumulate() as mode, pytest.raises(RuntimeError):
        a @ b.float()  # mixed dtypes raise as natively
    assert mode.ops == 0
    native = a @ b
    u = torch.finfo(dtype).eps
    assert float((mm.float() - native.float()).norm() / native.float().norm()) < 4 * u


def test_emulated_convolution_and_its_backward():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3, padding=1)
    x = torch.randn(2, 3, 8, 8)
    grads = {}
    for kind in ("native", "emulated"):
        conv.zero_grad()
        with cpu_kernels("cpu", torch.bfloat16, kind), torch.autocast("cpu", dtype=torch.bfloat16):
            y = conv(x)
        assert y.dtype == torch.bfloat16
        y.float().square().sum().backward()
        grads[kind] = conv.weight.grad.clone()
    rel = float((grads["native"] - grads["emulated"]).norm() / grads["native"].norm())
    assert 0 <= rel < 0.05


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gemm_kernels_compute_what_the_mode_computes_and_are_removed_on_exit(dtype):
    torch.manual_seed(0)
    a, b, bias = torch.randn(64, 300).to(dtype), torch.randn(300, 32).to(dtype), torch.randn(32).to(dtype)
    A, B, C = torch.randn(3, 16, 40).to(dtype), torch.randn(3, 40, 8).to(dtype), torch.randn(3, 16, 8).to(dtype)
    x, y = torch.randn(9, 9), torch.randn(9, 9)

    def ops():
        return [a @ b, torch.addmm(bias, a, b, beta=0.5, alpha=2.0), A @ B, torch.baddbmm(C, A, B, alpha=0.3)]

    native_before, native32 = ops(), x @ y
    with Float32Accumulate() as mode:
        want = ops()
    with Float32GEMMs() as kernels:
        got, got32 = ops(), x @ y
        with pytest.raises(RuntimeError, match="same dtype"):
            a @ b.float()  # mixed dtypes raise as natively
    assert kernels.ops == mode.ops == 4
    assert all(torch.equal(g, w) and g.dtype == dtype for g, w in zip(got, want))
    assert torch.equal(got32, native32)  # float32 goes through the same native kernel
    assert all(torch.equal(n, m) for n, m in zip(ops(), native_before))  # PyTorch's kernels are back


def test_gemm_kernels_under_autocast_and_backward():
    torch.manual_seed(0)
    lin = nn.Linear(7, 3)
    x = torch.randn(5, 7)
    grads = {}
    for ctx in (Float32Accumulate, Float32GEMMs):
        lin.zero_grad()
        with ctx(), torch.autocast("cpu", dtype=torch.bfloat16):
            out = lin(x)
        out.float().square().sum().backward()
        grads[ctx] = (out, lin.weight.grad.clone())
    assert grads[Float32GEMMs][0].dtype == torch.bfloat16
    assert torch.equal(grads[Float32GEMMs][0], grads[Float32Accumulate][0])
    assert torch.equal(grads[Float32GEMMs][1], grads[Float32Accumulate][1])


def test_cpu_kernels_scope_and_bad_value():
    assert isinstance(cpu_kernels("cpu", torch.float16), Float32Accumulate)
    assert isinstance(cpu_kernels("cpu", torch.float16, "emulated", nn.Linear(2, 2)), Float32GEMMs)
    assert isinstance(cpu_kernels("cpu", torch.float16, "emulated", nn.Sequential(nn.Conv1d(2, 2, 1))),
                      Float32Accumulate)  # convolutions need the mode
    for args in (("cpu", torch.float32), ("cuda", torch.bfloat16), ("cpu", torch.bfloat16, "native")):
        assert not isinstance(cpu_kernels(*args), (Float32Accumulate, Float32GEMMs))
    with pytest.raises(ValueError, match="cpu_kernels"):
        cpu_kernels("cpu", torch.bfloat16, "fast")


def _grads(step, mode, kernels):
    raw = replay.run_once(step, "cpu", mode, 0, keep=True, kernels=kernels)
    assert raw.error is None and not raw.nonfinite, raw.error
    return raw


@pytest.mark.parametrize("name", ["nanogpt", "resnet_bn"])
@pytest.mark.parametrize("mode", ["bfloat16", "float16"])
def test_emulated_and_native_runs_agree_within_the_noise_floor(name, mode):
    zoo = _zoo()
    torch.manual_seed(0)
    step = getattr(zoo, name)()
    ref = replay.run_once(step, "cpu", "float32", 0, keep=True)
    floor = replay.run_once(step, "cpu", "float32", 0, ref=ref, round_to=mode)
    emu = replay.run_once(step, "cpu", mode, 0, ref=ref)
    nat = replay.run_once(step, "cpu", mode, 0, ref=ref, kernels="native")
    tol = runs.Tolerances()
    f, e, n = (r.errors.model_error(tol) for r in (floor, emu, nat))
    assert emu.kernels == "emulated" and nat.kernels == "native"
    assert e <= tol.k * f and n <= tol.k * f, (e, n, f)
    # the two differ from each other by about as much as each differs from float32
    kept = _grads(step, mode, "emulated")
    other = replay.run_once(step, "cpu", mode, 0, ref=kept, kernels="native")
    between = other.errors.model_error(tol)
    assert between <= 2 * max(e, n) + f, (between, e, n, f)


def test_the_report_says_which_kernels_ran():
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2))
    step = TrainingStep(model, (torch.randn(8, 10), torch.randint(0, 2, (8,))),
                        lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
                        lambda p: torch.optim.SGD(p, lr=0.1))
    torch.manual_seed(0)
    emu = check_step(step, devices=["cpu"], cpu_kernels="emulated")
    nat = check_step(step, devices=["cpu"], cpu_kernels="native")
    assert emu.ok and nat.ok
    assert emu.cpu_kernels == "emulated" and nat.cpu_kernels == "native"
    rows = {r.mode: r.kernels for r in nat.runs}
    assert rows == {"float32": None, "bfloat16": "native", "float16": "native"}
    assert json.loads(emu.to_json())["cpu_kernels"] == "emulated"
    assert "as a GPU's tensor cores do" in str(emu) and "own cpu" in str(nat)
    with pytest.raises(ValueError, match="cpu_kernels"):
        check_step(step, devices=["cpu"], cpu_kernels="fast")


def test_auto_emulates_only_models_big_enough_for_it_to_pay():
    small = nn.Linear(16, 16)
    big = nn.Sequential(nn.Linear(16, 256), nn.Linear(256, 256))  # 65536-element weight
    assert resolve("auto", small) == "native" and resolve("auto", big) == "emulated"
    assert resolve("emulated", small) == "emulated" and resolve("native", big) == "native"
    conv = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten())  # its convolutions: float32 at the autocast kernel
    assert resolve("auto", conv) == "emulated" and resolve("auto", conv, "cpu") == "native"
    step = TrainingStep(big, (torch.randn(4, 16), torch.randn(4, 256)),
                        lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
                        lambda p: torch.optim.SGD(p, lr=0.01))
    torch.manual_seed(0)
    r = check_step(step, devices=["cpu"])
    assert r.ok and r.cpu_kernels == "emulated", str(r)


def test_cli_cpu_kernels_flag(capsys):
    from devlint.runtime.cli import main

    assert main(["--device", "cpu", "--cpu-kernels", "native", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cpu_kernels"] == "native"
    assert {r["kernels"] for r in data["runs"] if r["mode"] != "float32"} == {"native"}


class _Counter(nn.Module):
    """A forward whose result depends on a plain attribute it bumps: each run must start
    from the original value (the reused model copy is deep-copied afresh)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x) * self.calls


def test_reused_model_copy_starts_every_run_from_the_original():
    torch.manual_seed(0)
    model = _Counter()
    before = {n: p.detach().clone() for n, p in model.state_dict().items()}
    step = TrainingStep(model, (torch.randn(8, 6), torch.randint(0, 3, (8,))),
                        lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
                        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9))
    r = check_step(step, devices=["cpu"])
    assert r.ok, str(r)
    assert model.calls == 0 and all(torch.equal(before[n], t) for n, t in model.state_dict().items())
    bench = workcopy.WorkingCopy(model)
    a = bench.take()
    with torch.no_grad():
        a.fc.weight.add_(1.0)
    a.fc.weight.grad = torch.ones_like(a.fc.weight)
    b = bench.take()
    assert b is a and b.fc.weight.grad is None and torch.equal(b.fc.weight, model.fc.weight)
    b.calls = 5
    assert bench.take() is not b  # a plain attribute changed: a fresh deep copy


def test_chunked_measure_equals_the_direct_computation():
    torch.manual_seed(0)
    n = CHUNK * 2 + 123
    ref_g, ref_u = torch.randn(n), torch.randn(n)
    before = torch.randn(n)
    g = ref_g + 1e-3 * torch.randn(n)
    g[:50] = 0
    after = before + ref_u + 1e-2 * torch.randn(n)
    e = measure(1.0, {"w": ref_g}, {"w": ref_u}, 1.0, [("w", g)], {"w": Delta(after, before)}, {"w": 0.1})
    p = e.params["w"]
    assert math.isclose(p.grad, float((g - ref_g).double().norm() / ref_g.double().norm()), rel_tol=1e-4)
    assert math.isclose(p.update, float(((after - before) - ref_u).double().norm() / ref_u.double().norm()),
                        rel_tol=1e-4)
    assert p.zeros == 50
    g[7] = float("nan")
    assert measure(1.0, {"w": ref_g}, {}, 1.0, [("w", g)]).params["w"].grad == math.inf


@pytest.mark.parametrize("round_to", [None, "bfloat16", "float16", Rounding("bfloat16", 24.0)])
def test_a_group_of_updates_is_each_update_chunk_concatenated(round_to):
    torch.manual_seed(0)
    afters = [torch.randn(n) for n in (5, 30, 1, 200)]
    befores = [a + 1e-3 * torch.randn_like(a) for a in afters]
    afters[1], befores[1] = afters[1].reshape(5, 6).t(), befores[1].reshape(5, 6).t()  # not contiguous
    befores[2] = befores[2].double()
    deltas = [Delta(a, b, round_to) for a, b in zip(afters, befores)]
    assert torch.equal(_deltas(deltas), torch.cat([d.chunk(0, d.numel()) for d in deltas]))
    # and measure's numbers are the one-at-a-time path's
    refs = {str(i): torch.randn(d.numel()) for i, d in enumerate(deltas)}
    grads = [(k, r + 1e-3 * torch.randn_like(r)) for k, r in refs.items()]
    e = measure(1.0, refs, refs, 1.0, grads, dict(zip(refs, deltas)))
    for k, d in zip(refs, deltas):
        want = float((d.chunk(0, d.numel()) - refs[k]).double().norm() / refs[k].double().norm())
        assert math.isclose(e.params[k].update, want, rel_tol=1e-6)


def test_reference_keeps_updates_only_where_they_are_judged():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2))
    batch = (torch.randn(8, 10), torch.randint(0, 2, (8,)))

    def loss(m, b):
        return nn.functional.cross_entropy(m(b[0]), b[1])

    adam = TrainingStep(model, batch, loss, lambda p: torch.optim.AdamW(p, lr=1e-3))
    sgd = TrainingStep(model, batch, loss, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9))
    assert replay.run_once(adam, "cpu", "float32", 0, keep=True).updates == {}
    assert len(replay.run_once(sgd, "cpu", "float32", 0, keep=True).updates) == 4
    ra, rs = check_step(adam, devices=["cpu"]), check_step(sgd, devices=["cpu"])
    assert ra.ok and rs.ok
    low = [r for r in ra.runs if r.mode != "float32"]
    assert all(r.update_err is None and "updates not compared" in r.how for r in low)
    assert all(r.update_err is not None for r in rs.runs if r.mode != "float32")


def test_built_in_adaptive_optimizers_skip_the_update_nothing_compares(monkeypatch):
    """Adam's first update is ~lr*sign(g) and is not compared: its step (state allocation and
    update) is skipped once the gradients are captured; SGD's update is judged and runs."""
    calls = []
    real = torch.optim.Adam._init_group
    monkeypatch.setattr(torch.optim.Adam, "_init_group", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    batch = torch.randn(16, 8)
    for opt, runs_update in ((lambda p: torch.optim.Adam(p, lr=1e-3), False),
                             (lambda p: torch.optim.SGD(p, lr=1e-1), True)):
        step = TrainingStep(model, batch, lambda m, b: m(b).square().mean(), opt)
        report = check_step(step, devices=["cpu"])
        assert report.ok, str(report)
        assert replay._update_unused(step, opt(model.parameters())) is not runs_update
    assert calls == []
    sched = TrainingStep(model, batch, lambda m, b: m(b).square().mean(), lambda p: torch.optim.Adam(p),
                         scheduler=lambda o: torch.optim.lr_scheduler.StepLR(o, 1))
    assert not replay._update_unused(sched, torch.optim.Adam(model.parameters()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("groups", [1, 8])  # a plain and a depthwise convolution
def test_convolutions_under_cuda_rules_compute_in_float32_rounded_once(dtype, groups):
    """Emulated under CUDA's rules a convolution needs no dispatch mode: its operands are
    rounded to the low dtype, the convolution and its backward computed in float32 and each
    result rounded once, bit for bit what a float32 computation on the rounded operands
    gives (the GPU kernels' arithmetic, see autocast_policy.float32_convolutions)."""
    from devlint.runtime import autocast_policy

    torch.manual_seed(0)
    conv = nn.Conv2d(8, 8, 3, padding=1, groups=groups, bias=groups == 1)
    x = torch.randn(2, 8, 6, 6, requires_grad=True)
    g = (torch.randn(2, 8, 6, 6) * 100).to(dtype)
    with autocast_policy.policy("cuda"):
        ctx = cpu_kernels("cpu", dtype, "emulated", conv)
        assert not isinstance(ctx, Float32Accumulate)
        with ctx, torch.autocast("cpu", dtype=dtype):
            out = conv(x)
    out.backward(g)

    def rounded(t):
        return t.detach().to(dtype).float().requires_grad_()

    xr, wr = rounded(x), rounded(conv.weight)
    ref = nn.functional.conv2d(xr, wr, None if conv.bias is None else rounded(conv.bias), padding=1, groups=groups)
    ref.backward(g.float())
    assert out.dtype == dtype and torch.equal(out.float(), ref.detach().to(dtype).float())
    assert torch.equal(x.grad, xr.grad.to(dtype).float())
    assert torch.equal(conv.weight.grad, wr.grad.to(dtype).float())


def test_round_range_rounds_what_float16_cannot_hold_as_the_conversion_does():
    """The float16 noise floor's range rounding (computed without masked indexing) equals a
    round trip through float16 bit for bit below 2**-14 (ties to even, signed zeros, the
    boundary), leaves every other element alone, rounds a graph output in place and hands a
    leaf back with the difference added."""
    from devlint.runtime.compare import FLOAT16_TINY, round_range

    torch.manual_seed(0)
    x = torch.randn(4000) * torch.logspace(-9, 1, 4000)
    x[:10] = torch.tensor([2 ** -25, -2 ** -25, 3 * 2 ** -26, 2 ** -14 - 2 ** -26, 2 ** -14, 0.0, -0.0,
                           5 * 2 ** -25, 1.5 * 2 ** -24, -2.5 * 2 ** -24])
    expected = torch.where(x.abs() < FLOAT16_TINY, x.half().float(), x)
    leaf = x.clone().requires_grad_()
    out = round_range(leaf, "float16")
    assert out is not leaf and torch.equal(out.detach(), expected)  # t + delta: -0.0 becomes 0.0
    made = leaf * 1.0
    assert round_range(made, "float16") is made
    assert torch.equal(made.detach().view(torch.int32), expected.view(torch.int32))
    assert round_range(x, "bfloat16") is x
    big = x.abs() + 1
    assert round_range(big, "float16") is big  # nothing below 2**-14: the tensor itself


class _CpuOnesInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2 + torch.ones(grad.shape)  # bug: made on the CPU, in backward only


class _Doubler(nn.Module):
    def forward(self, x):
        return _CpuOnesInBackward.apply(x)


def _steps_with(middle):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), middle, nn.Linear(16, 4))
    return TrainingStep(model, (torch.randn(6, 8),), lambda m, b: m(b[0]).square().mean(),
                        lambda p: torch.optim.SGD(p, lr=1e-3))


def test_a_backward_mix_is_named_by_a_rerun_that_follows_the_backward(monkeypatch):
    # the stand-in first follows the forward's modules only; a CPU tensor met in backward is
    # named after a rerun that follows the backward's too, as a run that followed them throughout
    calls = []
    orig = replay._run_once
    monkeypatch.setattr(replay, "_run_once", lambda *a, **k: calls.append(k.get("backward_labels", False))
                        or orig(*a, **k))
    r = check_step(_steps_with(_Doubler()), devices=["cpu"], modes=["float32"])
    (f,) = r.findings
    assert (f.kind, f.module, f.op) == ("device-placement", "1 (_Doubler)", "aten.add.Tensor")
    assert "(backward)" in f.message and "aten.ones" in f.name
    assert calls == [False, True]
    calls.clear()
    assert check_step(_steps_with(nn.ReLU()), devices=["cpu"], modes=["float32"]).ok
    assert calls == [False]  # nothing named in backward: no rerun


def _floor_runs(monkeypatch):
    """The ``round_to`` of every noise-floor run a check makes, in order."""
    made = []
    real = runs.run_once

    def counted(step, device, mode, seed, **kwargs):
        if kwargs.get("round_to") is not None:
            made.append(kwargs["round_to"])
        return real(step, device, mode, seed, **kwargs)

    monkeypatch.setattr(runs, "run_once", counted)
    return made


@pytest.mark.parametrize("name, floors, shared", [
    # both modes beyond the quick bound, bfloat16 within 24x the float16 floor: one floor run
    ("resnet_bn", ["float16"], True),
    # bfloat16 beyond 24x the float16 floor (DINOv2's floors differ 5x): its own floor is run
    ("hf_dinov2", ["float16", "bfloat16"], False),
])
def test_bfloat16_is_judged_against_the_float16_floor_first(monkeypatch, name, floors, shared):
    made = _floor_runs(monkeypatch)
    torch.manual_seed(0)
    r = check_step(getattr(_zoo(), name)(), devices=["cpu"])
    bf16 = next(run for run in r.runs if run.mode == "bfloat16")
    assert r.ok, str(r)
    assert made == floors
    assert ("the float16 floor" in bf16.how) == shared, bf16.how


def test_the_float16_floor_is_not_run_for_bfloat16_alone(monkeypatch):
    made = _floor_runs(monkeypatch)
    torch.manual_seed(0)
    r = check_step(_zoo().resnet_bn(), devices=["cpu"], modes=["float32", "bfloat16"])
    assert r.ok and made == ["bfloat16"], (made, str(r))
