"""The runtime checker under torch.distributed: DDP/FSDP on 2 gloo processes against one process.

Every check starts 2 processes (fork where available: a fraction of a second each), on tiny
models, so the whole file stays within a few seconds of process start-up per test.
"""

import importlib.util
import multiprocessing
import os
import time
from collections import namedtuple
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not (dist.is_available() and dist.is_gloo_available()):  # pragma: no cover
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from devlint.runtime.distributed import GRAD_RTOL, batch_size, check_distributed, shard_batch  # noqa: E402
from devlint.runtime.reference import reference_step  # noqa: E402

STEPS = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "distributed_steps.py"
_spec = importlib.util.spec_from_file_location("devlint_distributed_fixture_steps", STEPS)
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)


def _check(step, **kw):
    kw.setdefault("devices", ["cpu"])
    report = check_distributed(step, 2, **kw)
    assert multiprocessing.active_children() == [], "a rank was left running"
    return report


def _kinds(report):
    return [f.kind for f in report.findings]


def _rows(report, kind="ddp"):
    return [r for r in report.runs if r.mode.startswith(f"{kind} rank")]


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


# ------------------------------------------------------------------------- sharding


def test_shard_batch_splits_dim0_and_replicates_the_rest():
    Pair = namedtuple("Pair", "x y")
    batch = {"pair": Pair(torch.arange(6.0).reshape(6, 1), torch.arange(6)), "scale": torch.tensor(2.0),
             "table": torch.ones(3, 2), "tag": "train"}
    assert batch_size(batch) == 6
    s1 = shard_batch(batch, 1, 2)
    assert isinstance(s1["pair"], Pair)
    assert s1["pair"].y.tolist() == [3, 4, 5] and s1["pair"].x.shape == (3, 1)
    assert s1["scale"] is batch["scale"] and s1["table"] is batch["table"] and s1["tag"] == "train"
    # 7 samples over 2 ranks: each rank gets 3 (the 7th is left out of the check)
    assert shard_batch(torch.arange(7), 1, 2).tolist() == [3, 4, 5]


def test_shard_batch_errors():
    with pytest.raises(ValueError, match="no tensor with a batch dimension"):
        shard_batch({"lr": torch.tensor(0.1)}, 0, 2)
    with pytest.raises(ValueError, match="1 sample"):
        shard_batch(torch.ones(1, 3), 0, 2)
    with pytest.raises(ValueError, match="world_size"):
        check_distributed(reference_step(), 1)
    with pytest.raises(ValueError, match="unknown device"):
        check_distributed(reference_step(), 2, devices=["mps"])
    with pytest.raises(TypeError):
        check_distributed(42, 2)


# ------------------------------------------------------------------------- correct steps


def test_reference_step_passes_under_ddp_and_fsdp():
    report = _check(reference_step())
    assert report.ok, str(report)
    assert [r.status for r in report.runs if r.device == "cpu"][0] == "reference"
    rows = _rows(report)
    assert [r.mode for r in rows] == ["ddp rank 0/2", "ddp rank 1/2"]
    for r in rows:
        assert r.status == "ok" and r.grad_err < GRAD_RTOL and r.update_err < GRAD_RTOL
        assert r.loss_err == 0 or r.loss_err < 1e-6
        # a rank's loss is its shard's, not the reference row's: the row says what it is against
        assert f"loss err vs one process on that shard (loss {r.loss:.6g})" in r.how, r.how
    fsdp = [r for r in report.runs if r.mode.startswith("fsdp")]
    assert fsdp and all(r.status in ("ok", "skipped") for r in fsdp)
    if not torch.cuda.is_available():
        assert any(r.device == "cuda" and r.status == "skipped" for r in
                   check_distributed(reference_step(), 2, devices=["cuda"]).runs)


def test_spawned_ranks_get_their_own_copy_of_the_step():
    # the start method CUDA ranks use; slower (each rank imports torch), so once, without FSDP
    step = reference_step()
    before = {n: p.detach().clone() for n, p in step.model.named_parameters()}
    report = _check(step, fsdp=False, start_method="spawn")
    assert report.ok, str(report)
    assert any("spawn" in n for n in report.notes)
    for n, p in step.model.named_parameters():
        assert torch.equal(p, before[n]) and not p.is_shared()  # the caller's model is untouched


def test_uneven_batch_is_cut_to_a_multiple_of_the_world_size():
    step = reference_step()
    step.batch = (torch.randn(5, 10), torch.randint(0, 2, (5,)))
    report = _check(step, fsdp=False)
    assert report.ok, str(report)
    assert any("checked on the first 4" in n for n in report.notes)


@pytest.mark.parametrize("name", ["conv_bn", "transformer_lm", "clipped_with_schedule", "custom_step",
                                  "sync_batchnorm", "batchnorm_shuffled"])
def test_correct_models_pass(name):
    report = _check(getattr(steps, name)())
    assert report.ok, str(report)
    assert all(r.status == "ok" for r in _rows(report)), str(report)


def test_an_autocast_region_the_step_opens_follows_cuda_rules_on_cpu_ranks():
    # torch.mv of a float16 autocast output and a float32 query: CUDA autocast casts both to
    # float16, CPU autocast raises; the ranks and the one-process runs stand in for GPUs
    torch.manual_seed(0)
    report = _check(steps.mv_pool_own_autocast(), fsdp=False)
    assert report.ok, str(report)
    rows = [r for r in report.runs if r.device == "cpu"]
    assert [r.mode for r in rows] == ["1 process, 8 samples", "ddp rank 0/2", "ddp rank 1/2"]
    assert {(r.policy, r.kernels) for r in rows} == {("cuda", "native")}
    assert "cuda/native" in str(report)
    torch.manual_seed(0)
    cpu_rules = _check(steps.mv_pool_own_autocast(), fsdp=False, autocast_policy="cpu")
    assert _kinds(cpu_rules) == ["step-error"] and "same dtype" in cpu_rules.findings[0].message
    plain = _check(steps.custom_step(), fsdp=False)  # no autocast region: no rules to name
    assert plain.ok and all(r.policy is None and r.kernels is None for r in plain.runs), str(plain)


def test_find_unused_parameters_declared_turns_the_finding_into_a_note():
    report = _check(steps.unused_branch(), ddp_options={"find_unused_parameters": True})
    assert report.ok, str(report)
    assert any("aux.weight" in n and "find_unused_parameters=True handles them" in n for n in report.notes)


# ------------------------------------------------------------------------- planted bugs


def test_unused_branch_is_named():
    report = _check(steps.unused_branch())
    assert _kinds(report) == ["unused-parameter"], str(report)
    f = report.findings[0]
    assert f.module == "aux (Linear)" and f.name == "aux.bias"
    assert set(f.details["parameters"]) == {"aux.weight", "aux.bias"} and f.details["ranks"] == [0, 1]
    assert "find_unused_parameters=True" in f.fix
    assert any(r.mode == "fsdp x2" and r.status == "skipped" for r in report.runs)


def test_batchnorm_without_sync_under_uneven_data_is_named():
    report = _check(steps.batchnorm_uneven())
    assert _kinds(report) == ["batchnorm-statistics"], str(report)
    f = report.findings[0]
    assert f.module == "bn (BatchNorm1d)" and f.details["z_rms"] > 3
    assert "SyncBatchNorm" in f.fix
    assert not report.ok and all(r.status == "mismatch" for r in _rows(report))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batchnorm_on_a_class_sorted_batch_is_a_finding_and_a_shuffled_one_passes(seed):
    torch.manual_seed(seed)
    report = _check(steps.batchnorm_class_sorted(), fsdp=False)
    (f,) = report.findings
    assert f.kind == "batchnorm-statistics" and f.module == "bn (BatchNorm1d)", str(report)
    assert "labels are split by rank (rank 0: class 0; rank 1: class 1" in f.message
    assert f.details["grad_rel_err"] > 0.1
    torch.manual_seed(seed)
    shuffled = _check(steps.batchnorm_shuffled(), fsdp=False)
    assert shuffled.ok and not shuffled.findings, str(shuffled)


def test_rank_dependent_init_is_named():
    # a factory: every rank builds its own model, as every rank of a torchrun script does
    report = _check(steps.rank_dependent_init)
    assert "rank-divergence" in _kinds(report), str(report)
    f = report.findings[0]
    assert f.details["rank"] == 1 and f.name == "fc1.weight" and f.module == "fc1 (Linear)"
    assert "builds different initial weights" in f.message and "manual_seed" in f.fix
    # DDP broadcasts rank 0's weights: its own rows match; FSDP keeps each rank's shard
    assert all(r.status == "ok" for r in _rows(report))
    fsdp = _rows(report, "fsdp")
    assert not fsdp or all(r.status == "mismatch" for r in fsdp)


def test_summed_loss_is_named():
    report = _check(steps.summed_loss())
    assert _kinds(report) == ["world-size-scale"], str(report)
    f = report.findings[0]
    assert f.details["scale"] == pytest.approx(0.5, rel=1e-4) and "sum" in f.message
    assert "reduction='mean'" in f.fix


def test_rank_dependent_forward_names_the_rank():
    report = _check(steps.rank_dependent_forward(), fsdp=False)
    assert _kinds(report) == ["rank-divergence"], str(report)
    f = report.findings[0]
    assert "rank 1's loss" in f.message and "rank 0's loss" not in f.message
    assert f.module == "fc2 (Linear)"


def test_a_rank_that_raises_is_named_and_every_process_stops():
    t0 = time.monotonic()
    report = _check(steps.rank1_raises(), timeout=30)
    assert time.monotonic() - t0 < 20  # stopped as soon as rank 1 failed, not at the timeout
    assert _kinds(report) == ["step-error"], str(report)
    f = report.findings[0]
    assert f.details["rank"] == 1 and "shard 1 is missing" in f.message
    assert "distributed_steps.py" in f.message and "_raise_on_rank1" in f.message
    assert {r.mode: r.status for r in _rows(report)} == {"ddp rank 0/2": "stopped", "ddp rank 1/2": "error"}


def test_a_rank_conditional_wait_is_a_deadlock_reported_in_time():
    t0 = time.monotonic()
    report = _check(steps.rank0_collective(), timeout=3, fsdp=False)
    assert time.monotonic() - t0 < 3 + 15
    assert _kinds(report) == ["deadlock"], str(report)
    msg = report.findings[0].message
    assert "within 3 s" in msg and "rank 0 is still in forward" in msg and "recv" in msg
    assert "_log_on_rank0" in msg
    assert all(r.status == "timeout" for r in _rows(report))


def test_a_hanging_step_leaves_no_process_behind(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("DEVLINT_TEST_PIDS", str(pids))
    t0 = time.monotonic()
    report = _check(steps.hangs(), timeout=3, fsdp=False)
    assert time.monotonic() - t0 < 3 + 15
    assert _kinds(report) == ["deadlock"], str(report)
    assert "_hang_with_child" in report.findings[0].message
    started = [int(p) for r in (0, 1) for p in (tmp_path / f"pids.{r}").read_text().split()]
    assert len(started) == 4  # two ranks, and a child process each
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in started if _alive(p)], "a rank or its child survived"


# ------------------------------------------------------------------------- check_step and the CLI


def test_check_step_with_world_size_adds_the_distributed_rows():
    from devlint.runtime import check_step

    step = reference_step()
    torch.manual_seed(123)
    before = torch.get_rng_state()
    report = check_step(step, devices=["cpu"], modes=["float32"], world_size=2)
    assert torch.equal(torch.get_rng_state(), before)  # the caller's RNG state is restored
    assert report.ok, str(report)
    modes = [r.mode for r in report.runs]
    assert modes[0] == "float32" and "ddp rank 0/2" in modes and "ddp rank 1/2" in modes
    assert multiprocessing.active_children() == []


def test_cli_world_size_names_a_rank_dependent_init():
    from conftest import devlint

    target = f"{STEPS}:rank_dependent_init"
    t0 = time.monotonic()
    res = devlint("runtime", target, "--world-size", "2", "--device", "cpu")
    wall = time.monotonic() - t0
    assert res.returncode == 1, res.stdout + res.stderr
    assert "[rank-divergence] cpu ddp x2" in res.stdout
    assert "rank 1 builds different initial weights from rank 0: fc1.weight" in res.stdout
    assert "cpu     ddp rank 1/2" in res.stdout
    assert wall < 120


def test_cli_world_size_must_be_at_least_2():
    from conftest import devlint

    res = devlint("runtime", "--world-size", "1")
    assert res.returncode == 2 and "--world-size: must be an integer >= 2" in res.stderr
