"""The runtime checker under torch.distributed: DDP (and FSDP2) on N local processes.

:func:`check_distributed` starts ``world_size`` processes (gloo on the CPU, NCCL on CUDA when
every rank has its own GPU), runs the step once per rank under ``DistributedDataParallel`` on
that rank's shard of the batch, then once more under FSDP2's ``fully_shard`` where the
installed torch supports it, and compares with one process:

- the *full-batch* step (one process, every sample): what the user expects DDP to reproduce;
- the *shard emulation*: per rank, one process runs the step on that rank's shard, and the
  per-rank gradients are averaged (what DDP's all-reduce computes); the optimizer then steps
  on that average. DDP must match this to fp32 summation order; when DDP matches it but not
  the full batch, the step itself is not shard-invariant (a summed loss, BatchNorm statistics,
  a per-batch normalisation), and devlint says which.

Findings name the parameter, module and rank: ``unused-parameter``, ``rank-divergence``,
``batchnorm-statistics``, ``world-size-scale``, ``not-shard-invariant``, ``deadlock``,
``step-error`` and ``device-placement``.

This module orchestrates; the parts live by concern: :mod:`.sharding` (splitting the batch),
:mod:`.ddp_rank` (what a rank computes), :mod:`.rank_processes` (starting, watching and
stopping the ranks; they are always cleaned up), :mod:`.shard_emulation` (the one-process
runs), :mod:`.dist_compare` (the arithmetic), :mod:`.dist_findings` (what differs, and why).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import pickle
import shutil
import tempfile
import warnings

import torch
import torch.nn as nn

from .ddp_rank import Job, Source
from . import emulate
from .autocast_policy import POLICIES
from .compare import Tolerances, unit_roundoff
from .devices import unavailable
from .dist_compare import GRAD_RTOL, MAX_NAMED, SAME_RTOL, updates
from .dist_findings import (BN_MIN_ERR, BN_ORDER_RATIO, BN_ORDERS, BN_Z, LABEL_P, LABEL_SPLITS, check_as_built,
                            check_backend, check_invariance, report_failures, unused_finding)
from .names import first_line
from .own_autocast import OwnAutocast
from .rank_processes import DEFAULT_TIMEOUT, STARTUP_TIMEOUT, joined_launch, launch_ranks, user_frame
from .report import Finding, Report, Run
from .shard_emulation import One, averaged, one_process
from .sharding import batch_size, leaves, shard_batch, truncate
from .step import TrainingStep, map_tensors

__all__ = ["check_distributed", "for_check_step", "batch_size", "shard_batch", "DEFAULT_TIMEOUT", "GRAD_RTOL",
           "SAME_RTOL", "BN_Z", "BN_ORDERS", "BN_ORDER_RATIO", "BN_MIN_ERR", "LABEL_P", "LABEL_SPLITS",
           "STARTUP_TIMEOUT"]


# --------------------------------------------------------------------------- the check


def _unavailable(device: str, world_size: int) -> str | None:
    import torch.distributed as dist

    if not dist.is_available():
        return "torch.distributed is not available in this torch build"
    if device == "cpu":
        return None if dist.is_gloo_available() else "the gloo backend is not available in this torch build"
    if device == "cuda":
        if unavailable(device):
            return unavailable(device)
        if not dist.is_nccl_available():
            return "the NCCL backend is not available in this torch build"
        n = torch.cuda.device_count()
        if n < world_size:
            return f"{world_size} ranks need {world_size} CUDA devices, found {n}"
        return None
    return f"unknown device {device!r}"


def _source_of(step, seed: int) -> tuple[Source, TrainingStep]:
    if isinstance(step, TrainingStep):
        return Source(step=step), step
    if isinstance(step, str):
        from .target import load_target

        return Source(target=step), load_target(step, seed)[0]
    if callable(step):
        source = Source(factory=step)
        return source, source.build(seed)
    raise TypeError(f"check_distributed needs a TrainingStep, a factory or a 'file.py:NAME' target, "
                    f"got {type(step).__name__}")


def _start_method(device: str, source: Source, wanted: str | None) -> tuple[str | None, str | None]:
    """(start method, reason it cannot start). fork shares the step without pickling (lambdas
    work) and skips re-importing torch; it is unsafe once CUDA is initialised in this process."""
    methods = mp.get_all_start_methods()
    if wanted:
        method = wanted
    elif "fork" in methods and not (device == "cuda" or torch.cuda.is_initialized()):
        method = "fork"
    else:
        method = "spawn"
    if method != "fork" and source.step is not None:
        try:
            pickle.dumps(source.step)
        except Exception as exc:  # noqa: BLE001
            return None, (f"the step cannot be sent to {method}ed processes ({first_line(exc)}); "
                          "pass a 'path/file.py:NAME' target, or use module-level functions")
    return method, None


def for_check_step(step: TrainingStep, devices, seed: int, world_size: int,
                   target: str | None = None, joined=None, policy: str = "cuda",
                   kernels: str = "auto") -> tuple[Report | None, list]:
    """:func:`check_distributed` as :func:`devlint.runtime.check_step` runs it: on the CPU and
    CUDA among ``devices``, with the check's autocast policy and CPU kernels, and the warnings
    it raised (for the deprecation findings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        warnings.simplefilter("always", FutureWarning)
        report = check_distributed(step, world_size, devices=[d for d in devices if d in ("cpu", "cuda")],
                                   seed=seed, target=target, joined=joined, autocast_policy=policy,
                                   cpu_kernels=kernels)
    return report, list(caught)


def check_distributed(step, world_size: int = 2, *, devices=None, timeout: float = DEFAULT_TIMEOUT,
                      seed: int = 0, fsdp: bool = True, ddp_options: dict | None = None,
                      start_method: str | None = None, report: Report | None = None,
                      target: str | None = None, joined=None, autocast_policy: str = "cuda",
                      cpu_kernels: str = "auto") -> Report | None:
    """Run ``step`` under DDP (and FSDP2) on ``world_size`` local processes and compare it with
    one process; explain what differs.

    With ``joined`` (a :class:`devlint.runtime.torchrun.Job`: this process was started by
    torchrun) no process is started: this process joins torchrun's process group as its rank
    and checks one device (CUDA when asked for and present, else the CPU); rank 0 gets every
    rank's results and returns the report, every other rank returns None.

    Per device (``"cpu"``: gloo; ``"cuda"``: NCCL, one GPU per rank, skipped with the reason
    when there are fewer): every rank joins the group, builds the step, moves the model to its
    device, takes its shard of the batch (:func:`shard_batch`; the batch is cut to a multiple
    of ``world_size`` samples, and the one-process runs use the same samples), wraps the model
    in ``DistributedDataParallel(model, find_unused_parameters=True, **ddp_options)``, seeds
    ``torch.manual_seed(seed)``, runs ``loss_fn`` on its shard, ``backward`` and
    ``optimizer.step()``. Then, with ``fsdp``, the same from the same initial weights under
    ``fully_shard(model)`` (listed as skipped, with the reason, where that is not supported).

    Compared (float32, on the CPU, scale-free relative L2, :data:`GRAD_RTOL`): each rank's
    gradients after the all-reduce and parameters after the step against the shard emulation
    (see the module docstring), the shard emulation against the full batch, and every rank's
    parameters against rank 0's (:data:`SAME_RTOL`). The table shows each rank against the
    full batch: its shard's loss (and its error against the same shard in one process), the
    gradient error, the smallest gradient cosine and the update error.

    Args:
        step: a :class:`TrainingStep` (every rank gets a copy of it), a zero-argument function
            returning one (called in every rank after ``torch.manual_seed(seed)``, with
            ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` set, as under torchrun), or a
            ``"path/file.py:NAME"`` target (loaded in every rank as ``devlint runtime`` does).
        world_size: the number of processes, at least 2.
        devices: ``"cpu"`` and/or ``"cuda"``; default both (CUDA listed as skipped if absent).
        timeout: seconds each rank may take for its step once all have joined; a step that
            runs longer is stopped and reported as ``deadlock`` with where each rank waits.
        seed: the RNG seed set before every run and every rank's ``loss_fn``.
        fsdp: also run the step under FSDP2's ``fully_shard``.
        ddp_options: the ``DistributedDataParallel`` keyword arguments the training script
            uses. ``find_unused_parameters`` is only used to judge unused parameters (devlint
            always passes True, so that every other check still runs).
        start_method: ``multiprocessing`` start method; default ``fork`` on the CPU where
            available (the step needs no pickling), else ``spawn`` (the step, or its factory,
            must pickle; a target always works).
        report: add the rows, findings and notes to this :class:`Report` instead of a new one.
        target: the ``"path/file.py:NAME"`` that ``step`` (a TrainingStep) came from: every
            rank loads it itself, as ``devlint runtime TARGET --world-size N`` does.
        autocast_policy: whose casting rules an autocast region the step opens itself follows
            on the CPU ranks and in the one-process CPU runs (a ``step_fn`` with
            ``torch.autocast(x.device.type, ...)``): ``"cuda"`` (default: the CPU ranks stand
            in for GPUs) or ``"cpu"``, as :func:`devlint.runtime.check_step`'s runs do
            (:class:`devlint.runtime.own_autocast.OwnAutocast`); each row whose run opened
            such a region says so in ``Run.policy`` and ``Run.kernels``.
        cpu_kernels: how those regions compute bfloat16/float16 GEMMs and convolutions on the
            CPU, as in :func:`devlint.runtime.check_step` (``"auto"``, ``"emulated"``,
            ``"native"``).

    Returns:
        the :class:`Report`; ``report.ok`` is True when every distributed run that ran matches
        and there are no findings. Processes are always stopped before it returns.

    Raises:
        TypeError: ``step`` is none of the accepted kinds.
        ValueError: ``world_size < 2``, an unknown device, policy or kernels, or a batch that
            cannot be split (no tensor with a batch dimension, fewer samples than ranks).
    """
    if autocast_policy not in POLICIES:
        raise ValueError(f"unknown autocast policy {autocast_policy!r}; use one of {', '.join(POLICIES)}")
    if not isinstance(world_size, int) or world_size < 2:
        raise ValueError(f"world_size must be an integer >= 2, got {world_size!r}")
    devices = list(dict.fromkeys(devices or ("cpu", "cuda")))
    for d in devices:
        if d not in ("cpu", "cuda"):
            raise ValueError(f"unknown device {d!r} for the distributed check; use cpu or cuda")
    if target is not None and isinstance(step, TrainingStep):
        source, local = Source(target=target), step
    else:
        source, local = _source_of(step, seed)
    size = batch_size(local.batch)
    if size is None:
        raise ValueError("the batch holds no tensor with a batch dimension to split over ranks")
    if size < world_size:
        raise ValueError(f"the batch has {size} sample(s); world size {world_size} needs at least "
                         f"{world_size}")
    keep = size - size % world_size
    kernels = emulate.resolve(cpu_kernels, local.model, autocast_policy)
    if report is None:
        report = Report(f"{local.name} under DDP x{world_size}", seed, torch.__version__, cpu_kernels=kernels,
                        autocast_policy=autocast_policy)
    if keep != size:
        report.notes.append(f"distributed: the batch of {size} samples does not split evenly over "
                            f"{world_size} ranks; checked on the first {keep}")
    replicated = [p for p, t in leaves(local.batch) if t.dim() == 0 or t.shape[0] != size]
    if replicated:
        report.notes.append("distributed: given whole to every rank (no batch dimension of "
                            f"{size}): {', '.join(replicated[:MAX_NAMED])}")
    ddp_options = dict(ddp_options or {})
    user_finds_unused = bool(ddp_options.pop("find_unused_parameters", False))
    if joined is not None:
        from . import torchrun

        if joined.world_size != world_size:
            raise ValueError(f"world size {world_size} asked for, but torchrun started {joined.world_size}")
        device = "cuda" if "cuda" in devices and not _unavailable("cuda", 1) else "cpu"
        reason = _unavailable(device, 1)
        if reason:
            raise ValueError(f"cannot join the torchrun job: {reason}")
        torchrun.join(joined, device)
        devices = [device]
    with torch.random.fork_rng(devices=[]):  # the caller's CPU RNG state is restored
        for device in devices:
            reason = _unavailable(device, world_size) if joined is None else None
            method = None if joined is None else "torchrun"
            if not reason and joined is None:
                method, reason = _start_method(device, source, start_method)
            if reason:
                report.runs.append(Run(device, f"ddp x{world_size}", "skipped", error=reason))
                continue
            rules = OwnAutocast(device, autocast_policy, kernels, local.model)
            if not _check_device(report, source, local, device, world_size, seed, timeout, size, keep,
                                 fsdp, ddp_options, user_finds_unused, method, rules):
                return None
    return report


def _check_device(report, source, local, device, ws, seed, timeout, size, keep, fsdp, ddp_options,
                  user_finds_unused, method, rules: OwnAutocast) -> bool:
    """The check on one device (see :func:`check_distributed`); its rows, findings and notes go
    into ``report``. False on a torchrun rank other than 0 (rank 0 reports)."""
    model = local.model
    full_batch = truncate(local.batch, size, keep)
    shards = [shard_batch(full_batch, r, ws, keep) for r in range(ws)]
    try:
        full = one_process(local, full_batch, seed, device, bn=True, rules=rules)
        again = one_process(local, full_batch, seed + 1, device, rules=rules)
        per_shard = [one_process(local, s, seed, device, shard=True, rules=rules) for s in shards]
    except Exception as exc:  # noqa: BLE001
        report.runs.append(Run(device, f"ddp x{ws}", "error", error=first_line(exc)))
        report.findings.append(Finding(
            "step-error", f"the one-process step raised {first_line(exc)}, so nothing distributed "
            "can be compared", "make the step run in one process first", device=device,
            mode=f"ddp x{ws}", details={"where": user_frame(exc.__traceback__)}))
        return True
    # The shard emulation: DDP averages the per-rank gradients (a rank without a gradient
    # for a parameter contributes zeros), then every rank steps on that average.
    emul = one_process(local, full_batch, seed, device, grads=averaged(per_shard, full.grads, ws))

    def reordered(perm: torch.Tensor) -> dict:
        """The shard emulation's gradients for the same samples in the order ``perm``."""
        batch = map_tensors(lambda t: t[perm] if t.dim() >= 1 and t.shape[0] == keep else t, full_batch)
        return averaged([one_process(local, shard_batch(batch, r, ws, keep), seed, device, shard=True,
                                     rules=rules) for r in range(ws)], full.grads, ws)

    policy, kernels = rules.label()
    rtol = _rounding_rtol(report, rules, device)
    report.runs.append(Run(device, f"1 process, {keep} samples", "reference", loss=full.loss, policy=policy,
                           kernels=kernels))

    unused = {n: [r for r, s in enumerate(per_shard) if s.grads.get(n) is None] for n in full.grads}
    unused = {n: rs for n, rs in unused.items() if rs}
    # DDP needs find_unused_parameters=True to finish a step with unused parameters; devlint
    # passes it only then (and reports them), so the other checks still run.
    ddp_kwargs = {**ddp_options, "find_unused_parameters": bool(unused) or user_finds_unused}
    fsdp_skip = None
    if fsdp and unused:
        fsdp_skip = "parameters without gradient on some rank (see unused-parameter)"
    if method == "fork":
        _preimport(fsdp and not fsdp_skip)
    import torch.distributed as dist  # noqa: F401 - loaded before fork

    backend = "nccl" if device == "cuda" else "gloo"
    if method == "torchrun":
        job = Job(source, ws, backend, device, seed, timeout, size, keep, fsdp and not fsdp_skip,
                   ddp_kwargs, "", batch=local.batch if source.per_rank else None,
                  policy=rules.policy, kernels=rules.kernels)
        launch = joined_launch(job)
        if launch is None:
            return False
        report.notes.append(f"distributed {device}: joined the torchrun job as rank 0 of {ws} "
                            f"({backend}); its ranks took {launch.seconds:.1f} s")
    else:
        folder = tempfile.mkdtemp(prefix="devlint-dist-")
        try:
            job = Job(source, ws, backend, device, seed, timeout, size, keep, fsdp and not fsdp_skip,
                       ddp_kwargs, folder, batch=local.batch if source.per_rank else None,
                      policy=rules.policy, kernels=rules.kernels)
            launch = launch_ranks(job, method)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        report.notes.append(f"distributed {device}: {ws} ranks ({backend}, {method}) took "
                            f"{launch.seconds:.1f} s")

    findings: list[Finding] = []
    label = f"ddp x{ws}"
    if not report_failures(report, findings, launch, device, ws, timeout, label):
        report.findings.extend(findings)
        return True
    results = launch.results
    check_as_built(findings, results, source, model, device, label)
    if unused:
        unused_finding(report, findings, unused, user_finds_unused, model, device, ws, label)
    # With SyncBatchNorm every rank normalises by the whole batch's statistics, so DDP must
    # reproduce the full batch; otherwise it must reproduce the shard emulation, and the shard
    # emulation is compared with the full batch.
    sync = any(isinstance(m, nn.SyncBatchNorm) for m in model.modules())
    expected = full if sync else emul
    observed = One(None, results[0]["grads"], full.before, results[0]["after"]) if sync else emul
    explained = check_invariance(report, findings, full, again, observed, model, device, ws, label,
                                  reordered=None if sync else reordered, batch=full_batch, size=keep,
                                  seed=seed, rtol=rtol)
    backends = [("ddp", results)]
    if fsdp:
        fr = [r.get("fsdp") if r else None for r in results]
        skip = fsdp_skip or next((f["skipped"] for f in fr if f and "skipped" in f), None)
        if skip or any(f is None for f in fr):
            backends.append(("fsdp", None))
            report.runs.append(Run(device, f"fsdp x{ws}", "skipped", error=skip or "no FSDP result"))
        else:
            backends.append(("fsdp", fr))
    seen = {f.kind for f in findings}
    for kind, res in backends:
        if res is None:
            continue
        found: list[Finding] = []
        bad = check_backend(found, res, expected, model, device, kind, ws, per_shard,
                             against_expected=not (sync and explained), rtol=rtol if sync else GRAD_RTOL)
        # FSDP repeats what DDP already showed; keep only what is new
        findings.extend(found if kind == "ddp" else (f for f in found if f.kind not in seen))
        seen |= {f.kind for f in found}
        if explained:
            bad = set(range(ws))
        _add_rows(report, res, full, per_shard, device, kind, ws, bad, sync,
                  [rules.label(r.get("autocast")) for r in results])
    report.findings.extend(findings)
    return True


def _preimport(fsdp: bool) -> None:
    """Import what every rank would import on its own (DDP pulls in torch._dynamo: seconds),
    once here, before forking."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import torch._dynamo  # noqa: F401
            from torch.nn.parallel import DistributedDataParallel  # noqa: F401

            if fsdp:
                from torch.distributed.fsdp import fully_shard  # noqa: F401
        except Exception:  # noqa: BLE001 - the ranks will say what fails
            pass


def _rounding_rtol(report, rules: OwnAutocast, device: str) -> float:
    """The tolerance between runs of different batch shapes (the shard emulation or DDP with
    SyncBatchNorm against one process on the full batch): :data:`GRAD_RTOL`, widened to
    ``Tolerances.quick`` unit roundoffs of the lowest precision of the autocast regions the
    step opened (GEMMs of another shape round differently: measured 3.1e-4, 0.6 u, on
    ``mv_pool_own_autocast`` in float16), with a note saying so."""
    low = [m for m in ("bfloat16", "float16") if m in rules.dtypes]
    if not low:
        return GRAD_RTOL
    rtol = max(GRAD_RTOL, *(Tolerances().quick * unit_roundoff(m) for m in low))
    report.notes.append(f"distributed {device}: the step opens {' and '.join(low)} autocast regions, so "
                        f"runs of different batch shapes are compared within {Tolerances().quick:g} unit "
                        f"roundoffs ({rtol:.2g}) instead of {GRAD_RTOL:g}")
    return rtol


def _add_rows(report, results, full: One, per_shard, device, kind, ws, bad_ranks,
              sync: bool = False, labels=None) -> None:
    """One row per rank. Columns against one process on the full batch, as
    :func:`devlint.runtime.compare.measure` computes them for every row of the report: the
    whole-model gradient error, the largest per-parameter update error; ``loss err`` is
    against one process on the rank's own shard (a rank's loss is its shard's, not the full
    batch's), which each row's ``how`` says with that process's loss. ``labels``: per rank, the row's
    ``(policy, kernels)`` (:meth:`devlint.runtime.own_autocast.OwnAutocast.label`)."""
    from .compare import DEFAULT_TOLERANCES, measure

    tol = DEFAULT_TOLERANCES["float32"]
    ref_upd = updates(full.after, full.before)
    for r, res in enumerate(results):
        loss_err = None  # with SyncBatchNorm one process on the shard alone is no reference
        if res.get("loss") is not None and per_shard[r].loss and not sync:
            loss_err = abs(res["loss"] - per_shard[r].loss) / abs(per_shard[r].loss)
        errs = measure(full.loss, full.grads, ref_upd, full.loss, res["grads"].items(),
                       updates(res["after"], full.before))
        upd = [p.update for p in errs.judged(tol).values() if not math.isnan(p.update)]
        how = None
        if r == 0:
            ref = "one process on the full batch" if sync else "the shard emulation"
            how = (f"gradients and updates vs {ref} (rtol {GRAD_RTOL:g}), parameters vs rank 0 "
                   f"(rtol {SAME_RTOL:g}); grad err and update err vs one process on the full batch")
        if loss_err is not None:  # its loss is its shard's: not the full batch's reference loss
            how = (how + "; " if how else "") + (
                f"loss is rank {r}'s, on its shard of the batch; loss err vs one process on that "
                f"shard (loss {per_shard[r].loss:.6g})")
        report.runs.append(Run(
            device, f"{kind} rank {r}/{ws}", "mismatch" if r in bad_ranks else "ok",
            loss=res.get("loss"), loss_err=loss_err, grad_err=errs.model_error(tol),
            update_err=max(upd, default=None), how=how,
            **dict(zip(("policy", "kernels"), labels[r] if labels else (None, None)))))


