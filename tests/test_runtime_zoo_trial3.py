"""A third fresh trial (fixtures/runtime/zoo_trial3.py; its architectures and planted bugs are
run by test_runtime_fresh_trials.py): the general causes it found, each tested alone. A
``torch.autocast("cuda")`` region made before the runs (a decorator at import) runs as asked,
gradients edited before ``scaler.unscale_``, a ``scaler.update()`` without ``scaler.step``, a loss
that underflows, a custom Function that returns another dtype, update errors that only a floor
can judge. CPU only, tiny models."""

import warnings

import pytest
from conftest import check_zoo_model, load_runtime_zoo

torch = pytest.importorskip("torch")

from devlint.runtime import check_step  # noqa: E402
from devlint.runtime import autocast_requests, compare  # noqa: E402
from devlint.runtime.grad_edits import GradEdits  # noqa: E402
from devlint.runtime.own_autocast import cuda_on_cpu  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

zoo = load_runtime_zoo("zoo_trial3")


_report = check_zoo_model


# --- a "cuda" region made before the runs -------------------------------------------------


def test_a_region_keeps_the_enabled_flag_it_was_asked_for():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        asked = [torch.autocast("cuda"), torch.autocast("cuda", enabled=False), torch.cuda.amp.autocast(False),
                 torch.cuda.amp.autocast(), torch.autocast("cpu", torch.bfloat16, False)]
    assert [autocast_requests.asked_enabled(a) for a in asked] == [True, False, False, True, False]


def _decorated(enabled):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if enabled:
            @torch.autocast(device_type="cuda", dtype=torch.float16)
            def f(x):
                return x @ x
        else:
            @torch.autocast(device_type="cuda", enabled=False)
            def f(x):
                return x @ x
    # as if made before devlint was imported: only the decorator's source says what it asked
    region = next(c.cell_contents for c in f.__closure__ if isinstance(c.cell_contents, torch.autocast))
    region.__dict__.pop("_devlint_asked_enabled")
    return f


@pytest.mark.parametrize("enabled, dtype", [(True, torch.float16), (False, torch.float32)])
def test_a_decorator_made_before_the_runs_runs_as_its_source_asks(enabled, dtype):
    f = _decorated(enabled)
    with cuda_on_cpu(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert f(torch.randn(3, 3)).dtype == dtype


def test_a_region_nothing_tells_about_stays_off():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        region = torch.autocast("cuda")
    region.__dict__.pop("_devlint_asked_enabled")
    with cuda_on_cpu(), torch.autocast("cpu", dtype=torch.bfloat16), region:
        assert (torch.randn(2, 2) @ torch.randn(2, 2)).dtype == torch.float32


def test_the_decorated_forward_row_says_it_ran_float16():
    r = _report(zoo.decorated_forward)
    assert r.ok and any("own torch.autocast('cuda') region in float16" in n for n in r.notes), str(r)


# --- the scaler's protocol ----------------------------------------------------------------


def _scaled_step(clip_first):
    m = torch.nn.Linear(3, 2)
    scaler = torch.amp.GradScaler("cpu")
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    edits = GradEdits(m, scaler)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = m(torch.randn(4, 3)).sum()
    scaler.scale(loss).backward()
    if clip_first:
        torch.nn.utils.clip_grad_value_(m.parameters(), 1.0)
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(m.parameters(), 0.01)  # after unscale_: fine
    scaler.step(opt)
    scaler.update()
    edits.close()
    assert "unscale_" not in scaler.__dict__
    return edits.touched


def test_gradients_edited_before_unscale_are_listed_and_after_are_not():
    assert sorted(_scaled_step(clip_first=True)) == ["bias", "weight"]
    assert _scaled_step(clip_first=False) == []


def test_clipping_by_norm_before_unscale_is_named_too():
    def step_fn(model, batch, optimizer, scaler):
        x, y = batch
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)  # the scaled gradients
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
        return loss

    step = zoo.clip_value_before_unscale()
    step.step_fn = step_fn
    torch.manual_seed(0)
    r = check_step(step, devices=["cpu"], modes=["float32", "float16"])
    assert [(f.kind, f.op) for f in r.errors] == [("mismatch", "GradScaler.unscale_")], str(r)


# --- judging ------------------------------------------------------------------------------


def test_an_update_beyond_the_quick_bound_asks_for_a_floor():
    # an SGD update of 1e-8 on a weight of 0.3 is measured to a few float32 spacings: only a
    # floor judges it (it was a bfloat16 false mismatch in scaler_ignored)
    err = compare.ParamError("w", 4, grad=1e-4, update=0.5, update_lr=None, ref_rms=1.0)
    errors = compare.Errors(loss=0.0, params={"w": err})
    assert compare.needs_floor(errors, "bfloat16", compare.DEFAULT_TOLERANCES["bfloat16"])
    err.update = float("nan")  # adaptive optimizers: updates not measured
    assert not compare.needs_floor(errors, "bfloat16", compare.DEFAULT_TOLERANCES["bfloat16"])


def test_a_step_that_ignores_its_scaler_is_said_even_when_nothing_underflows_yet():
    def step_fn(model, batch, optimizer, scaler):
        x, y = batch
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()  # the scaler it is given is never used
        optimizer.step()
        return loss

    step = zoo.clip_value_before_unscale()
    step.step_fn = step_fn
    torch.manual_seed(0)
    r = check_step(step, devices=["cpu"], modes=["float32", "float16"])
    said = [f for f in r.findings if f.op == "GradScaler.scale"]
    assert r.ok and [(f.kind, f.severity, f.module) for f in said] == [
        ("underflow", "info", "step_fn (the training step)")], str(r)


def test_a_scaler_made_at_import_scales_the_float16_run_and_is_left_as_it_was():
    before = dict(zoo.SCRIPT_SCALER.__dict__)
    r = _report(zoo.script_scaler)
    rows = {x.mode: x for x in r.runs}
    assert r.ok and rows["float16"].scale == 2.0 ** 16, str(r)
    assert not [f for f in r.findings if f.op == "GradScaler.scale"], str(r)  # it is used
    assert zoo.SCRIPT_SCALER.__dict__ == before and not zoo.SCRIPT_SCALER.is_enabled()
