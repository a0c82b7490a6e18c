"""A fresh trial (fixtures/runtime/zoo_trial.py, zoo_trial2.py): small architectures no other zoo holds, each
correct one passes, each planted bug is caught and named; and a step written for a GPU
(``torch.autocast("cuda")``, ``torch.amp.GradScaler("cuda")`` made in the step) is run on the
CPU as the GPU would run it, not in float32. CPU only, tiny models (~1 s each)."""

import importlib.util
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

from devlint.runtime import check_step  # noqa: E402


def _load(name):
    spec = importlib.util.spec_from_file_location(
        f"devlint_runtime_{name}", Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


zoo, zoo2 = _load("zoo_trial"), _load("zoo_trial2")
CORRECT = zoo.CORRECT + zoo2.CORRECT
PLANTED = {**zoo.PLANTED, **zoo2.PLANTED}


def _report(factory, **kw):
    torch.manual_seed(0)
    return check_step(factory(), devices=["cpu"], **kw)


def _rows(report):
    return {r.mode: r for r in report.runs if r.device == "cpu"}


def test_the_trial_is_large_enough():
    assert len(CORRECT) >= 20 and len(PLANTED) >= 10


@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
def test_correct_model_passes(factory):
    r = _report(factory)
    assert r.ok, str(r)
    assert [_rows(r)[m].status for m in ("float32", "bfloat16", "float16")] == ["reference", "ok", "ok"]


@pytest.mark.parametrize("factory", list(PLANTED), ids=lambda f: f.__name__)
def test_planted_bug_is_caught_and_named(factory):
    kind, module, words = PLANTED[factory]
    r = _report(factory)
    assert not r.ok
    found = [f for f in r.errors if f.kind == kind]
    assert found, str(r)
    assert module is None or found[0].module == module, str(r)
    assert any(words in " ".join(x or "" for x in (f.name, f.op, f.message)) for f in found), str(r)
    assert "never called optimizer.step()" not in str(r)
    if kind == "device-placement":  # only the planted problem: the numerics are fine
        assert {f.kind for f in r.errors} == {"device-placement"}, str(r)


def test_a_step_that_opens_cuda_autocast_runs_it_on_the_cpu_as_a_gpu_would():
    # own_amp opens torch.autocast("cuda", float16) and makes GradScaler("cuda") itself: torch
    # disables both without CUDA. The CPU runs stand in for CUDA, so the step's region is
    # float16 in every low-precision row (the bfloat16 row computes what the float16 row does)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # "CUDA is not available ... Disabling"
        r = _report(zoo.own_amp)
    rows = _rows(r)
    assert r.ok and rows["bfloat16"].loss == rows["float16"].loss != rows["float32"].loss, str(r)
    assert rows["float16"].scale == 2.0 ** 16 and rows["float16"].skipped_steps == 0
    assert [n for n in r.notes if "own torch.autocast('cuda') region" in n] == [
        "cpu bfloat16: the step opens its own torch.autocast('cuda') region in float16, which this run "
        "follows there, as a GPU would"]


def test_the_steps_own_cuda_scaler_is_judged():
    # its own scaler, never updated: only seen once GradScaler("cuda") is a working CPU scaler
    r = _report(zoo.own_amp_missing_update)
    assert [f.op for f in r.errors] == ["GradScaler.update"], str(r)
    # under CPU autocast's rules (training on a CPU) a "cuda" region and scaler stay disabled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert _report(zoo.own_amp_missing_update, autocast_policy="cpu").ok


def test_a_float16_overflow_inside_a_cuda_region_is_caught_and_named():
    # no float16 run of devlint's own: only the region the loss opens, torch.autocast("cuda"),
    # is float16 (CUDA's default), in the runs and in the replay that names the op
    step = zoo.gat_dot_fp16_overflow()
    plain = step.loss_fn

    def loss_in_own_region(model, batch):
        with torch.autocast("cuda"):
            return plain(model, batch)

    step.loss_fn = loss_in_own_region
    torch.manual_seed(0)
    r = check_step(step, devices=["cpu"], modes=["float32", "bfloat16"])
    assert [(f.kind, f.module, f.op) for f in r.errors] == [("non-finite", "l1 (GATLayer)", "aten.mul.Tensor")], str(r)


def test_distributed_cpu_runs_follow_the_steps_cuda_region():
    from devlint.runtime.distributed import check_distributed

    torch.manual_seed(0)
    report = check_distributed(zoo.own_amp(), 2, devices=["cpu"], fsdp=False)
    rows = [r for r in report.runs if r.device == "cpu"]
    assert report.ok, str(report)
    assert rows and {(r.policy, r.kernels) for r in rows} == {("cuda", "native")}, str(report)


def test_every_row_of_a_step_with_its_own_float16_region_names_the_overflow():
    # the bfloat16 row ran the step's own float16 region too: its finding says so and names
    # the op (replayed in float16), and the float16 one does not call bfloat16 unclean
    step = zoo.gat_dot_fp16_overflow()
    plain = step.loss_fn

    def own(model, batch, optimizer, scaler):
        mine = torch.amp.GradScaler("cuda")
        with torch.autocast(device_type="cuda"):
            loss = plain(model, batch)
        mine.scale(loss).backward()
        mine.step(optimizer)
        mine.update()
        return loss

    step.step_fn = own
    torch.manual_seed(0)
    r = check_step(step, devices=["cpu"])
    assert [(f.kind, f.mode, f.module, f.op) for f in r.errors] == [
        ("non-finite", m, "l1 (GATLayer)", "aten.mul.Tensor") for m in ("bfloat16", "float16")], str(r)
    assert "the step's own autocast region is float16" in r.errors[0].message
    assert "bfloat16 is not clean" not in r.errors[1].message


def test_a_compiled_model_is_checked_as_its_eager_module():
    # every run would recompile it (minutes); the check compares casting and placement
    step = zoo.accumulate_clip()
    step.model = torch.compile(step.model)
    step.name = type(step.model).__name__
    torch.manual_seed(0)
    r = check_step(step, devices=["cpu"])
    assert r.ok and r.step == "Tabular", str(r)
    assert any("torch.compile'd: checked as the module it wraps (Tabular" in n for n in r.notes), r.notes
