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
stopping the ranks; they are always cleaned up), :mod:`.dist_compare` (the arithmetic).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import pickle
import re
import shutil
import tempfile
import warnings

import torch
import torch.nn as nn

from .ddp_rank import Job, Source
from .dist_compare import GRAD_RTOL, MAX_NAMED, SAME_RTOL, bn_zscores, listed, model_error, rel_errors, updates, worst
from .devices import unavailable
from .names import first_line, module_of
from .rank_processes import (DEFAULT_TIMEOUT, DONE, PHASES, STARTUP_TIMEOUT, Launch, joined_launch, launch_ranks,
                             user_frame)
from .report import Finding, Report, Run
from .shard_emulation import One, averaged, one_process
from .sharding import batch_size, leaves, shard_batch, truncate
from .step import TrainingStep, map_tensors

__all__ = ["check_distributed", "for_check_step", "batch_size", "shard_batch", "DEFAULT_TIMEOUT", "GRAD_RTOL",
           "SAME_RTOL", "BN_Z", "BN_ORDERS", "BN_ORDER_RATIO", "BN_MIN_ERR", "LABEL_P", "LABEL_SPLITS",
           "STARTUP_TIMEOUT"]

#: A BatchNorm's per-rank statistics "differ from the full batch" when the per-rank channel
#: means are off by more than this many standard errors of random sharding, RMS over channels
#: and ranks (under a random split each is about N(0, 1), so an RMS of 3 is a 3-sigma event).
BN_Z = 3.0
#: A plain BatchNorm whose channel means stay within :data:`BN_Z` is still reported when DDP's
#: gradients (whole model, relative L2 against one process) differ by more than ``BN_MIN_ERR``
#: and by more than ``BN_ORDER_RATIO`` times the most that ``BN_ORDERS`` random orders of the
#: same samples give: the batch's order gives each rank different data (a class-sorted batch),
#: not sampling noise. Source: a Linear-BatchNorm-MLP, 30 seeds, 2 ranks: a batch in random
#: order reaches at most 1.10x (16 samples) and 1.21x (8) the largest of 8 random orders; a
#: class-sorted batch of 16 whose class means are 0.3 standard deviations apart, a median of
#: 1.76x (0.5 apart: 2.36x), while its channel means stay below 3 standard errors. With 4
#: samples per rank a sorted batch is not told apart from a random one (median 1.0x).
BN_ORDERS = 8
BN_ORDER_RATIO = 1.5
BN_MIN_ERR = 0.1
#: ... or when the batch's class labels (a 1-D integer tensor of the batch's length) are split
#: over the ranks more unevenly than this fraction of random splits (a permutation test of the
#: chi-square statistic of the per-rank label counts, :data:`LABEL_SPLITS` random splits): a
#: class-sorted batch of 16 in 2 classes is split as it is by 2 in 12870 random splits (1.6e-4).
LABEL_P = 5e-4
LABEL_SPLITS = 8000

_COMM_ERROR = re.compile(r"Connection closed by peer|Connection reset|Broken pipe|Timed out|timed out|"
                         r"NCCL communicator was aborted|ProcessGroup.*abort|Socket Timeout|"
                         r"Read error|Write error", re.I)
_DEVICE_ERROR = re.compile(r"same device|on the expected device|device mismatch|different devices|"
                           r"invalid device ordinal")


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
                   target: str | None = None, joined=None) -> tuple[Report | None, list]:
    """:func:`check_distributed` as :func:`devlint.runtime.check_step` runs it: on the CPU and
    CUDA among ``devices``, with the warnings it raised (for the deprecation findings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        warnings.simplefilter("always", FutureWarning)
        report = check_distributed(step, world_size, devices=[d for d in devices if d in ("cpu", "cuda")],
                                   seed=seed, target=target, joined=joined)
    return report, list(caught)


def check_distributed(step, world_size: int = 2, *, devices=None, timeout: float = DEFAULT_TIMEOUT,
                      seed: int = 0, fsdp: bool = True, ddp_options: dict | None = None,
                      start_method: str | None = None, report: Report | None = None,
                      target: str | None = None, joined=None) -> Report | None:
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

    Returns:
        the :class:`Report`; ``report.ok`` is True when every distributed run that ran matches
        and there are no findings. Processes are always stopped before it returns.

    Raises:
        TypeError: ``step`` is none of the accepted kinds.
        ValueError: ``world_size < 2``, an unknown device, or a batch that cannot be split
            (no tensor with a batch dimension, fewer samples than ranks).
    """
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
    if report is None:
        report = Report(f"{local.name} under DDP x{world_size}", seed, torch.__version__)
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
            if not _check_device(report, source, local, device, world_size, seed, timeout, size, keep,
                                 fsdp, ddp_options, user_finds_unused, method):
                return None
    return report


def _check_device(report, source, local, device, ws, seed, timeout, size, keep, fsdp, ddp_options,
                  user_finds_unused, method) -> None:
    model = local.model
    full_batch = truncate(local.batch, size, keep)
    shards = [shard_batch(full_batch, r, ws, keep) for r in range(ws)]
    try:
        full = one_process(local, full_batch, seed, device, bn=True)
        again = one_process(local, full_batch, seed + 1, device)
        per_shard = [one_process(local, s, seed, device, shard=True) for s in shards]
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
        return averaged([one_process(local, shard_batch(batch, r, ws, keep), seed, device, shard=True)
                          for r in range(ws)], full.grads, ws)

    report.runs.append(Run(device, f"1 process, {keep} samples", "reference", loss=full.loss))

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
                   ddp_kwargs, "", batch=local.batch if source.per_rank else None)
        launch = joined_launch(job)
        if launch is None:
            return False
        report.notes.append(f"distributed {device}: joined the torchrun job as rank 0 of {ws} "
                            f"({backend}); its ranks took {launch.seconds:.1f} s")
    else:
        folder = tempfile.mkdtemp(prefix="devlint-dist-")
        try:
            job = Job(source, ws, backend, device, seed, timeout, size, keep, fsdp and not fsdp_skip,
                       ddp_kwargs, folder, batch=local.batch if source.per_rank else None)
            launch = launch_ranks(job, method)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        report.notes.append(f"distributed {device}: {ws} ranks ({backend}, {method}) took "
                            f"{launch.seconds:.1f} s")

    findings: list[Finding] = []
    label = f"ddp x{ws}"
    if not _report_failures(report, findings, launch, device, ws, timeout, label):
        report.findings.extend(findings)
        return True
    results = launch.results
    _check_as_built(findings, results, source, model, device, label)
    if unused:
        _unused_finding(report, findings, unused, user_finds_unused, model, device, ws, label)
    # With SyncBatchNorm every rank normalises by the whole batch's statistics, so DDP must
    # reproduce the full batch; otherwise it must reproduce the shard emulation, and the shard
    # emulation is compared with the full batch.
    sync = any(isinstance(m, nn.SyncBatchNorm) for m in model.modules())
    expected = full if sync else emul
    observed = One(None, results[0]["grads"], full.before, results[0]["after"]) if sync else emul
    explained = _check_invariance(report, findings, full, again, observed, model, device, ws, label,
                                  reordered=None if sync else reordered, batch=full_batch, size=keep,
                                  seed=seed)
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
        bad = _check_backend(found, res, expected, model, device, kind, ws, per_shard,
                             against_expected=not (sync and explained))
        # FSDP repeats what DDP already showed; keep only what is new
        findings.extend(found if kind == "ddp" else (f for f in found if f.kind not in seen))
        seen |= {f.kind for f in found}
        if explained:
            bad = set(range(ws))
        _add_rows(report, res, full, per_shard, device, kind, ws, bad, sync)
    report.findings.extend(findings)
    return True


def _unused_finding(report, findings, unused, user_finds_unused, model, device, ws, label) -> None:
    by_rank = sorted({r for rs in unused.values() for r in rs})
    names = sorted(unused)
    mods = list(dict.fromkeys(module_of(model, n) for n in names))
    everywhere = all(len(rs) == ws for rs in unused.values())
    what = (f"{len(names)} parameter(s) get no gradient on "
            f"{'every rank' if everywhere else 'rank(s) ' + ', '.join(map(str, by_rank))}: "
            f"{listed([(n, 0) for n in names])} (module {', '.join(mods[:3])})")
    if user_finds_unused:
        report.notes.append(f"distributed {device}: {what}; find_unused_parameters=True handles them")
        return
    findings.append(Finding(
        "unused-parameter",
        f"{what}: DDP with find_unused_parameters=False (the default) raises \"Expected to "
        "have finished reduction in the prior iteration\" at the next step"
        + ("" if everywhere else ", and the ranks' collectives no longer match"),
        "use the module in the loss, delete it or call requires_grad_(False) on it, or "
        "pass find_unused_parameters=True to DistributedDataParallel",
        module=mods[0], name=names[0], device=device, mode=label,
        details={"parameters": names, "ranks": by_rank}))


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


def _report_failures(report, findings, launch: Launch, device, ws, timeout, label) -> bool:
    """Rows and findings for ranks that failed or hung; True when every rank finished."""
    if not launch.timed_out and all(v == DONE for v in launch.phases):
        return True
    res = launch.results
    errors = {r: res[r] for r in range(ws) if res[r] and res[r].get("error")}
    primary = {r: e for r, e in errors.items() if not _COMM_ERROR.search(e["error"])} or errors
    hung = [r for r in range(ws) if launch.phases[r] >= 0 and launch.phases[r] != DONE]
    for r in range(ws):
        ph = abs(launch.phases[r])
        if r in errors:
            status, err = "error", f"{errors[r]['error']} ({errors[r]['phase']})"
        elif r in hung:
            where = launch.stacks.get(r)
            status = "timeout" if launch.timed_out else "stopped"
            err = f"still in {PHASES[ph]}" + (f", {where}" if where else "")
        elif launch.phases[r] == DONE:
            status, err = "stopped", "finished; the other ranks did not"
        else:
            status, err = "error", f"exited with code {launch.exitcodes[r]} in {PHASES[ph]}"
        report.runs.append(Run(device, f"ddp rank {r}/{ws}", status,
                               loss=res[r].get("loss") if res[r] else None, error=err))
    if not (launch.timed_out and not primary):
        for r in hung:
            where = f", {launch.stacks[r]}" if launch.stacks.get(r) else ""
            report.notes.append(f"distributed {device}: rank {r} was stopped while in "
                                f"{PHASES[abs(launch.phases[r])]}{where}")
    if launch.timed_out and not primary:
        waits = "; ".join(
            f"rank {r} is still in {PHASES[abs(launch.phases[r])]}"
            + (f", {launch.stacks[r]}" if launch.stacks.get(r) else "") for r in hung)
        done = [r for r in range(ws) if launch.phases[r] == DONE]
        if done:
            waits += f"; rank(s) {', '.join(map(str, done))} finished the step"
        findings.append(Finding(
            "deadlock",
            f"the step did not finish within {timeout:g} s on {ws} processes: {waits}",
            "make every rank run the same collectives in the same order: no collective "
            "(all_reduce, barrier, a DDP forward/backward) inside `if rank == ...`",
            device=device, mode=label,
            details={"timeout_s": timeout, "ranks": hung, "where": launch.stacks}))
        return False
    for r, e in primary.items():
        kind = "device-placement" if _DEVICE_ERROR.search(e["error"]) else "step-error"
        where = f" at {e['where']}" if e.get("where") else ""
        findings.append(Finding(
            kind, f"rank {r} of {ws} raised {e['error']} in {e['phase']}{where}",
            "move every tensor the step uses with .to(device), or create it with device="
            if kind == "device-placement" else
            "make the step run on every rank: no code that assumes one process or the whole batch",
            device=device, mode=f"ddp rank {r}/{ws}",
            details={"rank": r, "phase": e["phase"], "where": e.get("where"),
                     "traceback": e.get("traceback")}))
    if not errors:
        for r in range(ws):
            if res[r] is None and launch.phases[r] != DONE and r not in hung:
                findings.append(Finding(
                    "step-error", f"rank {r} of {ws} exited with code {launch.exitcodes[r]} in "
                    f"{PHASES[abs(launch.phases[r])]} without a Python error (killed, or os._exit)",
                    "run the step under torchrun to see how the process ends",
                    device=device, mode=f"ddp rank {r}/{ws}", details={"rank": r}))
    return False


def _check_as_built(findings, results, source, model, device, label) -> None:
    if not source.per_rank:
        return
    base = results[0]["as_built"]
    for r in range(1, len(results)):
        errs = rel_errors(results[r]["as_built"], base)
        bad = worst(errs, SAME_RTOL)
        if bad:
            findings.append(Finding(
                "rank-divergence",
                f"rank {r} builds different initial weights from rank 0: {listed(bad)} (relative "
                f"difference {bad[0][1]:.2g}); DDP copies rank 0's parameters and buffers when it "
                "wraps the model, but FSDP, a hand-written all-reduce and any tensor that is not "
                "a parameter or buffer keep each rank's own",
                "seed every rank alike before building the model (torch.manual_seed(seed), not "
                "seed + rank), or load the same checkpoint on every rank",
                module=module_of(model, bad[0][0]), name=bad[0][0], device=device, mode=label,
                details={"rank": r, "tensors": [n for n, _ in bad]}))
            return


def _check_backend(findings, results, emul: One, model, device, kind, ws, per_shard,
                   against_expected: bool = True) -> set[int]:
    """DDP/FSDP against the expected one-process result (``emul``) and rank 0; returns the
    ranks with findings."""
    bad_ranks: set[int] = set()
    label = f"{kind} x{ws}"
    g_errs = [worst(rel_errors(res["grads"], emul.grads), GRAD_RTOL) if against_expected else []
              for res in results]
    if any(g_errs):
        ranks = [r for r, b in enumerate(g_errs) if b]
        bad_ranks.update(ranks)
        g_bad = g_errs[ranks[0]]
        culprits = []
        for r, res in enumerate(results):
            ref = per_shard[r].loss
            if ref is not None and res.get("loss") is not None and not math.isclose(
                    res["loss"], ref, rel_tol=GRAD_RTOL, abs_tol=1e-12):
                culprits.append(f"rank {r}'s loss is {res['loss']:.6g} where one process on the same "
                                f"samples gives {ref:.6g}")
        why = ("; " + ", ".join(culprits)) if culprits else "; every rank's loss matches one process"
        findings.append(Finding(
            "rank-divergence",
            f"after {kind.upper()}'s gradient all-reduce, {listed(g_bad)} differ from the average of "
            f"the ranks' gradients computed in one process (relative error {g_bad[0][1]:.2g}, "
            f"tolerance {GRAD_RTOL:g}){why}: the step computes something else under "
            "torch.distributed (rank-dependent code, or state that is neither a parameter nor a "
            "buffer and so is not synchronised)",
            "make the forward depend only on the batch, parameters and buffers; register "
            "tensors with register_buffer and give every rank the same values",
            module=module_of(model, g_bad[0][0]), name=g_bad[0][0], device=device,
            mode=label, details={"ranks": ranks, "rel_err": g_bad[0][1]}))
    for r, res in enumerate(results):
        if g_errs[r] or not against_expected or emul.after is None:
            continue
        u_bad = worst(rel_errors(updates(res["after"], emul.before), updates(emul.after, emul.before)),
                       GRAD_RTOL)
        if u_bad:
            bad_ranks.add(r)
            findings.append(Finding(
                "rank-divergence",
                f"rank {r}: the gradients match, but the optimizer step moves {listed(u_bad)} "
                f"differently from one optimizer step on the same averaged gradient (relative "
                f"error {u_bad[0][1]:.2g})",
                "build the optimizer alike on every rank (same lr and options, no rank in them)",
                module=module_of(model, u_bad[0][0]), name=u_bad[0][0], device=device,
                mode=f"{label} rank {r}/{ws}", details={"rank": r, "rel_err": u_bad[0][1]}))
    base = results[0]["after"]
    for r in range(1, len(results)):
        bad = worst(rel_errors(results[r]["after"], base), SAME_RTOL)
        if bad:
            bad_ranks.update({0, r})
            findings.append(Finding(
                "rank-divergence",
                f"ranks diverge: after one step rank {r}'s {listed(bad)} differ from rank 0's "
                f"(relative difference {bad[0][1]:.2g}); every later step trains a different model "
                "on each rank",
                "give every rank the same initial weights, gradients and optimizer (see the other "
                "findings for which differs)",
                module=module_of(model, bad[0][0]), name=bad[0][0], device=device,
                mode=f"{label} rank {r}/{ws}", details={"rank": r, "tensors": [n for n, _ in bad]}))
    return bad_ranks


def _add_rows(report, results, full: One, per_shard, device, kind, ws, bad_ranks,
              sync: bool = False) -> None:
    """One row per rank. Columns against one process on the full batch, as
    :func:`devlint.runtime.compare.measure` computes them for every row of the report: the
    whole-model gradient error, the largest per-parameter update error; ``loss err`` is
    against one process on the rank's own shard."""
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
                   f"(rtol {SAME_RTOL:g}); columns vs one process on the full batch")
        report.runs.append(Run(
            device, f"{kind} rank {r}/{ws}", "mismatch" if r in bad_ranks else "ok",
            loss=res.get("loss"), loss_err=loss_err, grad_err=errs.model_error(tol),
            update_err=max(upd, default=None), how=how))


def _check_invariance(report, findings, full: One, again: One, emul: One, model, device, ws,
                      label, reordered=None, batch=None, size: int = 0, seed: int = 0) -> bool:
    """The shard emulation against the full batch: explain a difference by the world size
    (a scale), BatchNorm statistics, or report the step as not shard-invariant. True when a
    finding was added."""
    errs = rel_errors(emul.grads, full.grads)
    noise = max(rel_errors(again.grads, full.grads).values(), default=0.0)
    tol = max(GRAD_RTOL, 3 * noise)
    bad = worst(errs, tol)
    stochastic = noise > GRAD_RTOL
    if stochastic:
        report.notes.append(f"distributed {device}: the step is random (two seeds give gradients "
                            f"{noise:.2g} apart); the full-batch comparison allows 3x that")
    if not bad:
        return False
    names = [n for n in full.grads if full.grads[n] is not None and emul.grads.get(n) is not None]
    f = torch.cat([full.grads[n].double().flatten() for n in names])
    e = torch.cat([emul.grads[n].double().flatten() for n in names])
    c = float(e @ f) / max(float(f @ f), 1e-300)
    resid = float((e - c * f).norm())
    gap = float((e - f).norm())
    if abs(c - 1) > 0.01 and resid <= 0.1 * gap:
        if math.isclose(c, 1 / ws, rel_tol=0.01):
            why = ("the loss is a sum over the batch: DDP averages the ranks' gradients, so each "
                   "rank's sum counts 1/world_size")
            fix = ("average the loss over the batch (reduction='mean'); if a sum is meant, "
                   "multiply the loss by the world size")
        elif math.isclose(c, ws, rel_tol=0.01):
            why = "the loss is multiplied by the world size (or divided by the per-rank batch size)"
            fix = "divide by the global batch size, or drop the world-size factor"
        else:
            why = "the loss is normalised by something that changes with the world size"
            fix = "normalise the loss by the per-rank number of samples (a mean)"
        findings.append(Finding(
            "world-size-scale",
            f"the gradient scale depends on the world size: under DDP with {ws} ranks the gradient "
            f"is {c:.3g}x the one-process gradient on the same samples ({why}); the learning rate "
            "changes with the number of GPUs",
            fix, module="loss_fn", name=bad[0][0], device=device, mode=label,
            details={"scale": c, "world_size": ws}))
        return True
    zs = bn_zscores(full.bn, ws)
    flagged: dict[str, tuple] = {}
    for name, kind, z, n_r in zs:
        if z > BN_Z and (name not in flagged or z > flagged[name][1]):
            flagged[name] = (kind, z, n_r)
    if flagged:
        for name, (kind, z, n_r) in list(flagged.items())[:3]:
            findings.append(Finding(
                "batchnorm-statistics",
                f"{name} ({kind}) normalises each rank's {n_r} samples with that rank's own batch "
                f"statistics, which differ from the full batch's beyond random sharding (channel "
                f"means off by {z:.1f} standard errors, RMS): DDP's gradients differ from one "
                f"process's by {bad[0][1]:.2g} ({bad[0][0]})",
                "convert it with nn.SyncBatchNorm.convert_sync_batchnorm(model) before wrapping in "
                "DDP, or shuffle the data across ranks (DistributedSampler)",
                module=f"{name} ({kind})", name=f"{name}.running_mean", device=device, mode=label,
                details={"z_rms": z, "samples_per_rank": n_r, "grad_rel_err": bad[0][1]}))
        return True
    if zs and reordered is not None and _sorted_batch(findings, zs, full, emul, reordered, batch, size, seed,
                                                      device, label, ws):
        return True
    if zs:
        mods = ", ".join(dict.fromkeys(f"{n} ({k})" for n, k, _, _ in zs))
        report.notes.append(
            f"distributed {device}: {mods} normalise each rank's samples by that rank's statistics "
            f"(within random-sharding noise: RMS z <= {max(z for *_, z, _ in zs):.1f}), so DDP's "
            f"gradients differ from one process's by up to {bad[0][1]:.2g}; SyncBatchNorm would "
            "make them equal")
        return False
    if stochastic:
        return False
    findings.append(Finding(
        "not-shard-invariant",
        f"the average of the ranks' gradients differs from one process on the whole batch: "
        f"{listed(bad)} (relative error {bad[0][1]:.2g}, tolerance {tol:.2g}): the loss or the model "
        "couples the samples of a batch (a per-batch normalisation or statistic), so training "
        "changes with the world size",
        "compute the loss per sample and average it; normalise by global counts (all_reduce them) "
        "where a per-batch count is needed",
        module=module_of(model, bad[0][0]), name=bad[0][0], device=device, mode=label,
        details={"rel_err": bad[0][1]}))
    return True


def _sorted_batch(findings, zs, full: One, emul: One, reordered, batch, size: int, seed: int,
                  device, label, ws) -> bool:
    """Plain BatchNorm under DDP whose gradients this batch's order moves far beyond what
    random orders of the same samples do (:data:`BN_ORDER_RATIO`): a ``batchnorm-statistics``
    finding; True when added."""
    err = model_error(emul.grads, full.grads)
    if not err > BN_MIN_ERR:
        return False
    split = _label_split(batch, size, ws, seed)
    rand = None
    if split is None:
        gen = torch.Generator().manual_seed(seed)
        rand = max(model_error(reordered(torch.randperm(size, generator=gen)), full.grads)
                   for _ in range(BN_ORDERS))
        if not err > BN_ORDER_RATIO * rand:
            return False
        why = (f"{err / max(rand, 1e-30):.1f}x the most that {BN_ORDERS} random orders of the same "
               f"samples give ({rand:.2g})")
    else:
        why = f"the batch's labels are split by rank ({split})"
    name, kind, z, n_r = max(zs, key=lambda t: t[2])
    findings.append(Finding(
        "batchnorm-statistics",
        f"{name} ({kind}) normalises each rank's {n_r} samples with that rank's own batch statistics, "
        f"and this batch's order gives the ranks different data: DDP's gradients differ from one "
        f"process's by {err:.2g} (whole model), {why}; a sorted or grouped batch (by class, "
        "source or length) trains another model under DDP",
        "convert it with nn.SyncBatchNorm.convert_sync_batchnorm(model) before wrapping in DDP, "
        "or shuffle the data across ranks (DistributedSampler)",
        module=f"{name} ({kind})", name=f"{name}.running_mean", device=device, mode=label,
        details={"grad_rel_err": err, "random_orders_max": rand, "z_rms": z, "samples_per_rank": n_r}))
    return True


def _label_split(batch, size: int, ws: int, seed: int) -> str | None:
    """How the batch's class labels split over the ranks, when random sharding would split them
    that unevenly less often than :data:`LABEL_P`: ``"rank 0: classes 0, 1; rank 1: ..."``;
    None otherwise, or when the batch holds no labels (a 1-D integer tensor of ``size``
    elements with 2 to ``size // 2`` distinct values)."""
    labels = next((t for _, t in leaves(batch) if t.dim() == 1 and t.shape[0] == size
                   and not t.is_floating_point() and t.dtype != torch.bool), None)
    if labels is None:
        return None
    classes, codes = torch.unique(labels.cpu(), return_inverse=True)
    if not 2 <= len(classes) <= size // 2:
        return None
    n = size // ws
    onehot = torch.nn.functional.one_hot(codes, len(classes)).double()
    expected = onehot.sum(0) / size * n

    def chi2(counts):  # counts [..., ws, C]
        return ((counts - expected) ** 2 / expected).sum((-1, -2))

    seen = chi2(onehot.view(ws, n, -1).sum(1))
    gen = torch.Generator().manual_seed(seed)
    perms = torch.stack([torch.randperm(size, generator=gen) for _ in range(LABEL_SPLITS)])
    random = chi2(onehot[perms].view(LABEL_SPLITS, ws, n, -1).sum(2))
    p = (1 + int((random >= seen - 1e-9).sum())) / (1 + LABEL_SPLITS)
    if p >= LABEL_P:
        return None
    held = ["rank {}: {} {}".format(r, "class" if len(cs) == 1 else "classes", ", ".join(cs))
            for r in range(ws) for cs in [[str(int(classes[c])) for c in
                                          torch.unique(codes[r * n:(r + 1) * n]).tolist()]]]
    return f"{'; '.join(held)}; random sharding splits them this unevenly with probability {p:.1g}"
