"""check_step on the CPU: the reference step, each broken fixture, tolerances, the report."""

import importlib.util
import json
import math
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from devlint.runtime import Report, Tolerances, TrainingStep, check_step  # noqa: E402
from devlint.runtime.reference import TinyClassifier, reference_step  # noqa: E402

STEPS = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "steps.py"
_spec = importlib.util.spec_from_file_location("devlint_runtime_fixture_steps", STEPS)
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)

CUDA = torch.cuda.is_available()


def _check(factory, **kw) -> Report:
    torch.manual_seed(0)
    return check_step(factory(), devices=["cpu"], **kw)


def _kinds(report):
    return [f.kind for f in report.findings]


@pytest.fixture(scope="module")
def reference_report():
    return check_step(reference_step())


def test_reference_step_is_clean(reference_report):
    r = reference_report
    assert r.ok, str(r)
    assert r.findings == []
    cpu = {run.mode: run for run in r.runs if run.device == "cpu"}
    assert [cpu[m].status for m in ("float32", "bfloat16", "float16")] == ["reference", "ok", "ok"]
    assert all(math.isfinite(run.loss) for run in cpu.values())
    assert cpu["bfloat16"].grad_err < 1.6e-2 and cpu["float16"].grad_err < 1e-2
    assert cpu["float16"].skipped_steps == 0 and cpu["float16"].scale == 65536.0
    r.assert_ok()


@pytest.mark.skipif(CUDA, reason="checks how a missing CUDA device is reported")
def test_missing_devices_are_listed_as_skipped(reference_report):
    skipped = {run.device: run for run in reference_report.runs if run.status == "skipped"}
    assert "cuda" in skipped and "is_available() is False" in skipped["cuda"].error
    assert "skipped: no CUDA device" in str(reference_report)


def test_reference_step_matches_the_seed_example():
    step = reference_step(0)
    torch.manual_seed(0)
    model = TinyClassifier()
    x = torch.randn(4, 10)
    y = torch.randint(0, 2, (4,))
    assert torch.equal(step.batch[0], x) and torch.equal(step.batch[1], y)
    assert torch.equal(step.model.fc1.weight, model.fc1.weight)
    assert isinstance(step.optimizer(model.parameters()), torch.optim.SGD)


def test_text_and_json_hold_the_same_content(reference_report):
    text = str(reference_report)
    data = json.loads(reference_report.to_json())
    assert data["ok"] is True and data["findings"] == []
    # check_step received a model built by its caller: the header must not claim it was seeded
    assert data["model_seeded"] is False and "seed 0 (the runs only;" in text.splitlines()[0]
    header = text.splitlines()[2]
    for col in ("device", "mode", "loss", "grad err", "skipped steps", "status"):
        assert col in header
    for run in data["runs"]:
        assert run["device"] in text and run["status"] in text
        if run["loss"] is not None:
            assert f"{run['loss']:.6g}" in text


def test_users_model_is_not_mutated():
    step = steps.arange_in_forward()
    before = {k: v.clone() for k, v in step.model.state_dict().items()}
    params = list(step.model.parameters())
    rng = torch.get_rng_state()
    check_step(step)
    assert torch.equal(torch.get_rng_state(), rng)
    after = step.model.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert list(step.model.parameters()) == params
    assert all(p.grad is None and p.device.type == "cpu" and p.dtype == torch.float32 for p in params)
    assert step.batch[0].device.type == "cpu"


def test_device_less_arange_in_forward_is_caught_and_named():
    r = _check(steps.arange_in_forward)
    (f,) = [f for f in r.findings if f.kind == "device-placement"]
    assert f.module == "pos (AddPosition)"
    assert f.op == "aten.add.Tensor"
    assert "aten.arange" in f.name and f.related == "DEV112"
    assert "device=" in f.fix
    assert not r.ok


def test_tensor_attribute_is_caught():
    r = _check(steps.tensor_attribute)
    (f,) = r.findings
    assert (f.kind, f.name, f.related, f.op) == ("device-placement", "scale", "DEV113", "aten.mul.Tensor")
    assert "register_buffer" in f.fix


def test_layers_in_a_python_list_are_caught():
    r = _check(steps.layer_list)
    placement = [f for f in r.findings if f.kind == "device-placement"]
    expected = {"layers[0] (Linear), in a plain container", "layers[1] (Linear), in a plain container"}
    assert {f.module for f in placement} == expected
    assert all(f.related == "DEV114" and "ModuleList" in f.fix for f in placement)


def test_correct_placement_is_not_flagged():
    r = _check(steps.clean)
    assert r.ok, str(r)


def test_float16_overflow_is_caught_and_bfloat16_is_clean():
    r = _check(steps.fp16_overflow)
    runs = {run.mode: run for run in r.runs}
    assert runs["float16"].status == "non-finite"
    assert runs["float16"].skipped_steps == 0  # reported at once, not retried
    assert runs["bfloat16"].status == "ok"
    (f,) = [f for f in r.findings if f.kind == "non-finite"]
    assert f.module == "fc1 (Linear)" and f.op == "aten._to_copy.default"
    assert "bfloat16 runs clean" in f.message
    (lo_hi,) = [i for i in f.details["inputs"] if i[0] == "float32"]
    assert max(abs(lo_hi[2]), abs(lo_hi[3])) > 65504


def test_underflow_is_measured():
    r = _check(steps.tiny_gradients)
    (f,) = [f for f in r.findings if f.kind == "underflow"]
    assert f.details["fraction"] > 0.5
    assert f.details["kept_by_scaler"] == f.details["lost"]
    assert f.name in dict(steps.tiny_gradients().model.named_parameters())


def test_half_model_is_caught():
    r = _check(steps.half_model)
    (f,) = [f for f in r.findings if f.kind == "master-weights"]
    assert f.related == "DEV208" and f.details["dtype"] == "float16"
    fp16 = next(run for run in r.runs if run.mode == "float16")
    assert fp16.status == "error" and "Attempting to unscale FP16 gradients" in fp16.error


def test_deprecation_warnings_are_reported_once():
    r = _check(steps.deprecated_api)
    deps = [f for f in r.findings if f.kind == "deprecation"]
    assert len(deps) == 1
    assert deps[0].op == "torch.cuda.amp.autocast" and deps[0].related == "DEV206"


def test_scaler_calibration_counts_skipped_steps():
    def loud_loss(model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y) * 20

    torch.manual_seed(0)
    r = check_step(TrainingStep(TinyClassifier(), (torch.randn(4, 10), torch.randint(0, 2, (4,))),
                                loud_loss, lambda p: torch.optim.SGD(p, lr=0.01)), devices=["cpu"])
    fp16 = next(run for run in r.runs if run.mode == "float16")
    assert fp16.skipped_steps >= 1 and fp16.scale < 65536
    assert fp16.status == "ok", str(r)


def test_the_scaler_settles_like_training_does():
    def big_loss(model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y) * 1e6

    torch.manual_seed(0)
    r = check_step(TrainingStep(TinyClassifier(), (torch.randn(4, 10), torch.randint(0, 2, (4,))),
                                big_loss, lambda p: torch.optim.SGD(p, lr=0.01)), devices=["cpu"])
    fp16 = next(run for run in r.runs if run.mode == "float16")
    assert fp16.status == "ok", str(r)
    assert fp16.skipped_steps > 6 and fp16.scale == 2.0 ** 16 / 2 ** fp16.skipped_steps


def test_gradients_that_always_overflow_end_the_calibration():
    def huge_loss(model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y) * 1e30

    torch.manual_seed(0)
    r = check_step(TrainingStep(TinyClassifier(), (torch.randn(4, 10), torch.randint(0, 2, (4,))),
                                huge_loss, lambda p: torch.optim.SGD(p, lr=0.01)), devices=["cpu"])
    fp16 = next(run for run in r.runs if run.mode == "float16")
    assert fp16.status == "non-finite" and "skipped every step" in fp16.error
    (f,) = [f for f in r.findings if f.kind == "non-finite"]
    assert "backward" in f.message


def test_non_finite_reference_is_explained():
    def nan_loss(model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y) + torch.log(model.fc1.bias.sum() * 0 - 1)

    torch.manual_seed(0)
    r = check_step(TrainingStep(TinyClassifier(), (torch.randn(4, 10), torch.randint(0, 2, (4,))),
                                nan_loss, lambda p: torch.optim.SGD(p, lr=0.01)), devices=["cpu"])
    assert not r.ok
    (f,) = [f for f in r.findings if f.kind == "non-finite" and f.mode == "float32"]
    assert f.op == "aten.log.default" and "loss_fn" in f.module
    assert {run.status for run in r.runs if run.mode != "float32"} <= {"not compared", "non-finite"}


def test_tolerances_can_be_tightened_and_mismatches_name_parameters():
    exact = Tolerances(quick=0.0, k=1e-3)  # always calibrate, allow nothing above the floor
    r = check_step(reference_step(), devices=["cpu"], modes=["bfloat16"], tolerances={"bfloat16": exact})
    (f,) = [f for f in r.findings if f.kind == "mismatch"]
    bf16 = next(run for run in r.runs if run.mode == "bfloat16")
    assert bf16.status == "mismatch" and bf16.floor is not None and bf16.floor > 0
    assert {"fc1.weight", "fc2.weight"} <= {w[0] for w in f.details["worst"]}
    assert f.module.endswith("(Linear)")
    with pytest.raises(AssertionError, match="mismatch"):
        r.assert_ok()


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="unknown device"):
        check_step(reference_step(), devices=["tpu"])
    with pytest.raises(ValueError, match="unknown mode"):
        check_step(reference_step(), modes=["float8"])
    model = TinyClassifier()
    with pytest.raises(TypeError, match="factory"):
        TrainingStep(model, torch.randn(4, 10), lambda m, b: m(b).sum(),
                     torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(TypeError, match=r"loss module \(CrossEntropyLoss\).*lambda m, b"):
        TrainingStep(model, (torch.randn(4, 10), torch.zeros(4, dtype=torch.long)), nn.CrossEntropyLoss(),
                     lambda p: torch.optim.SGD(p, lr=0.1))


def test_nested_batches_and_bad_loss():
    model = nn.Linear(3, 1)
    batch = {"inputs": [torch.randn(2, 3)], "meta": ("tag", 7)}
    r = check_step(TrainingStep(model, batch, lambda m, b: m(b["inputs"][0]).mean(),
                                lambda p: torch.optim.SGD(p, lr=0.1)), devices=["cpu"])
    assert r.ok, str(r)
    bad = check_step(TrainingStep(model, batch, lambda m, b: m(b["inputs"][0]),
                                  lambda p: torch.optim.SGD(p, lr=0.1)), devices=["cpu"])
    assert bad.findings[0].kind == "step-error" and "scalar" in bad.findings[0].message


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_runs_and_explains_device_mismatch():
    r = check_step(reference_step(), devices=["cuda"])
    cuda = [run for run in r.runs if run.device == "cuda"]
    assert [run.status for run in cuda] == ["ok", "ok", "ok"], str(r)
    torch.manual_seed(0)
    bad = check_step(steps.arange_in_forward(), devices=["cuda"])
    errors = [run for run in bad.runs if run.device == "cuda" and run.status == "error"]
    assert errors and all("device" in run.error for run in errors)
    assert any(f.kind == "device-placement" for f in bad.findings)


def _tiny():
    torch.manual_seed(0)
    return TinyClassifier(), (torch.randn(4, 10), torch.randint(0, 2, (4,)))


def _ce(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


def test_custom_step_fn_with_accumulation_and_clipping_passes():
    calls = []

    def step_fn(model, batch, optimizer, scaler):
        x, y = batch
        optimizer.zero_grad()
        for half in (slice(0, 2), slice(2, 4)):  # two micro-batches
            loss = F.cross_entropy(model(x[half]), y[half]) / 2
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        calls.append(type(scaler).__name__)
        return loss

    model, batch = _tiny()
    r = check_step(TrainingStep(model, batch, _ce, lambda p: torch.optim.AdamW(p, lr=1e-3),
                                step_fn=step_fn), devices=["cpu"])
    assert r.ok, str(r)
    assert calls and set(calls) == {"GradScaler"}


def test_clipping_before_unscale_is_named_as_a_rescaled_step_not_an_unstable_module():
    def step_fn(model, batch, optimizer, scaler):
        loss = _ce(model, batch)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # bug: clips the scaled gradients
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
        return loss

    model, batch = _tiny()
    r = check_step(TrainingStep(model, batch, _ce, lambda p: torch.optim.AdamW(p, lr=1e-3), step_fn=step_fn),
                   devices=["cpu"])
    assert not r.ok
    (f,) = [f for f in r.findings if f.kind == "mismatch"]
    assert f.mode == "float16" and f.related == "DEV205" and f.module == "step_fn (the training step)"
    assert "one factor for the whole model" in f.message and "scaler.unscale_(optimizer)" in f.fix
    assert 0 < f.details["factor"] < 0.5 and f.details["residual"] < 0.1
    assert [run.status for run in r.runs if run.mode == "bfloat16"] == ["ok"]  # no scaler there


def test_step_fn_without_loss_scaling_underflows():
    def step_fn(model, batch, optimizer, scaler):
        loss = _ce(model, batch) * 1e-7
        loss.backward()  # bug: no scaler.scale(loss)
        optimizer.step()
        return loss

    model, batch = _tiny()
    r = check_step(TrainingStep(model, batch, _ce, lambda p: torch.optim.SGD(p, lr=0.1), step_fn=step_fn),
                   devices=["cpu"], modes=["float16"])
    (f,) = [f for f in r.findings if f.kind == "underflow"]
    assert f.severity == "error" and "never called" in f.message and not r.ok


def test_step_fn_scaling_with_its_own_disabled_scaler_is_said_so():
    with warnings.catch_warnings():  # GradScaler("cuda") on a machine without CUDA warns
        warnings.simplefilter("ignore", UserWarning)
        own = torch.amp.GradScaler("cuda", enabled=False)  # bug: a config check turned it off

    def step_fn(model, batch, optimizer, scaler):
        loss = _ce(model, batch) * 1e-7
        own.scale(loss).backward()
        own.step(optimizer)
        own.update()
        return loss

    model, batch = _tiny()
    r = check_step(TrainingStep(model, batch, _ce, lambda p: torch.optim.SGD(p, lr=0.1), step_fn=step_fn),
                   devices=["cpu"], modes=["float16"])
    (f,) = [f for f in r.findings if f.kind == "underflow"]
    assert f.severity == "error" and "its own GradScaler is disabled" in f.message, str(r)
    assert "enabled=" in f.fix and "never called" not in f.message


def test_underflow_recovered_by_the_scaler_is_information_only():
    r = _check(steps.tiny_gradients)
    (f,) = [f for f in r.findings if f.kind == "underflow"]
    assert f.severity == "info" and r.ok, str(r)
    assert "(info)" in str(r)


def test_optimizer_factory_sees_parameter_names_and_hooks_run():
    seen = []

    def make(params):
        seen.append([n for n, _ in params.named])
        no_decay = [p for n, p in params.named if n.endswith("bias")]
        decay = [p for n, p in params.named if not n.endswith("bias")]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                  {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)

    model, batch = _tiny()
    r = check_step(TrainingStep(model, batch, _ce, make, clip_grad_norm=0.5,
                                scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, 1)),
                   devices=["cpu"])
    assert r.ok, str(r)
    assert seen[0] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert "adaptive optimizer" in str(r)


def test_assert_step_ok_helper():
    from devlint.runtime import assert_step_ok

    assert assert_step_ok(reference_step(), devices=["cpu"]).ok
    with pytest.raises(BaseException, match="device-placement"):
        torch.manual_seed(0)
        assert_step_ok(steps.tensor_attribute(), devices=["cpu"])


def test_pytest_plugin_is_registered(pytestconfig):
    assert pytestconfig.pluginmanager.hasplugin("devlint")


def test_probe_that_cannot_finish_makes_the_report_fail():
    def pointer_loss(model, batch):
        x, y = batch
        # the stand-in device holds no memory of its own: its data_ptr() is 0
        assert x.data_ptr(), "the batch has no storage"
        return F.cross_entropy(model(x), y)

    model, batch = _tiny()
    r = check_step(TrainingStep(model, batch, pointer_loss, lambda p: torch.optim.SGD(p, lr=0.1)),
                   devices=["cpu"])
    assert not r.ok
    (f,) = [f for f in r.findings if f.kind == "probe-incomplete"]
    assert "AssertionError" in f.message
    assert next(run for run in r.runs if run.mode == "float32").status == "reference"


def test_missing_kernel_is_unsupported_not_a_model_error():
    class NoHalf(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(10, 2)

        def forward(self, x):
            h = self.fc(x)
            if h.dtype == torch.float16:
                raise RuntimeError('"slow_conv_thing" not implemented for \'Half\'')
            return h

    torch.manual_seed(0)
    r = check_step(TrainingStep(NoHalf(), (torch.randn(4, 10), torch.randint(0, 2, (4,))), _ce,
                                lambda p: torch.optim.SGD(p, lr=0.1)), devices=["cpu"])
    fp16 = next(run for run in r.runs if run.mode == "float16")
    assert fp16.status == "unsupported" and r.ok, str(r)
    assert any("no float16 kernel" in n for n in r.notes)


def test_cpu_lengths_that_cuda_accepts_are_not_flagged():
    class CTC(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            return self.fc(x).log_softmax(-1)

    def ctc(model, batch):
        x, targets = batch
        logp = model(x).transpose(0, 1)  # T, N, C
        in_len = torch.full((x.shape[0],), x.shape[1], dtype=torch.long)  # CPU, as cuDNN wants
        tgt_len = torch.tensor([3, 2])
        return F.ctc_loss(logp, targets, in_len, tgt_len)

    torch.manual_seed(0)
    batch = (torch.randn(2, 12, 8), torch.randint(1, 5, (2, 3)))
    r = check_step(TrainingStep(CTC(), batch, ctc, lambda p: torch.optim.SGD(p, lr=0.1)),
                   devices=["cpu"])
    assert not [f for f in r.findings if f.kind == "device-placement"], str(r)


def test_item_and_data_dependent_control_flow_work_on_the_stand_in():
    class Gated(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(10, 2)
            self.register_buffer("gate", torch.tensor([1.0, 0.0]))

        def forward(self, x):
            h = self.fc(x)
            if h.abs().max().item() > 0 and bool(self.gate.sum() > 0):
                h = h * self.gate.new_tensor([1.0, 0.5])
            return h + torch.zeros(2, device=x.device)

    torch.manual_seed(0)
    r = check_step(TrainingStep(Gated(), (torch.randn(4, 10), torch.randint(0, 2, (4,))), _ce,
                                lambda p: torch.optim.SGD(p, lr=0.1)), devices=["cpu"])
    assert r.ok, str(r)
