"""The distributed check's findings: what DDP/FSDP ranks did differently from one process,
and why, named by parameter, module and rank: ``unused-parameter``, ``rank-divergence``,
``batchnorm-statistics``, ``world-size-scale``, ``not-shard-invariant``, ``deadlock``,
``step-error`` and ``device-placement``. Inputs are the ranks' saved results and the
one-process runs (:mod:`.shard_emulation`); the thresholds are this module's constants."""

from __future__ import annotations

import math
import re

import torch

from .dist_compare import GRAD_RTOL, SAME_RTOL, bn_zscores, listed, model_error, rel_errors, updates, worst
from .names import module_of
from .rank_processes import DONE, PHASES, Launch
from .report import Finding, Run
from .shard_emulation import One
from .sharding import leaves

__all__ = ["BN_Z", "BN_ORDERS", "BN_ORDER_RATIO", "BN_MIN_ERR", "LABEL_P", "LABEL_SPLITS", "unused_finding",
           "report_failures", "check_as_built", "check_backend", "check_invariance"]


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


def unused_finding(report, findings, unused, user_finds_unused, model, device, ws, label) -> None:
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


def report_failures(report, findings, launch: Launch, device, ws, timeout, label) -> bool:
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


def check_as_built(findings, results, source, model, device, label) -> None:
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


def check_backend(findings, results, emul: One, model, device, kind, ws, per_shard,
                   against_expected: bool = True, rtol: float = GRAD_RTOL) -> set[int]:
    """DDP/FSDP against the expected one-process result (``emul``, gradients within ``rtol``)
    and rank 0; returns the ranks with findings."""
    bad_ranks: set[int] = set()
    label = f"{kind} x{ws}"
    g_errs = [worst(rel_errors(res["grads"], emul.grads), rtol) if against_expected else []
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
            f"tolerance {rtol:g}){why}: the step computes something else under "
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


def check_invariance(report, findings, full: One, again: One, emul: One, model, device, ws,
                      label, reordered=None, batch=None, size: int = 0, seed: int = 0,
                      rtol: float = GRAD_RTOL) -> bool:
    """The shard emulation against the full batch (gradients within ``rtol``, or 3x the
    difference two seeds make): explain a difference by the world size (a scale), BatchNorm
    statistics, or report the step as not shard-invariant. True when a finding was added."""
    errs = rel_errors(emul.grads, full.grads)
    noise = max(rel_errors(again.grads, full.grads).values(), default=0.0)
    tol = max(rtol, 3 * noise)
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
