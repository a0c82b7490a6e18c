"""The arithmetic of the distributed check: relative errors between the gradients, updates and
parameters of DDP/FSDP ranks and of one process, float64 on the CPU, scale-free; and how far
each rank's BatchNorm statistics are from the full batch's, in standard errors of random
sharding. The tolerances are :data:`GRAD_RTOL` and :data:`SAME_RTOL`."""

from __future__ import annotations

import math

import torch

from .compare import rel_l2

__all__ = ["GRAD_RTOL", "SAME_RTOL", "MAX_NAMED", "rel_errors", "updates", "worst", "listed", "bn_zscores",
           "model_error"]


#: Scale-free relative tolerance between two float32 gradients (or updates) of the same
#: samples computed in a different summation order: DDP against the shard emulation, and the
#: shard emulation against the full batch. Source: the error of the average of per-shard
#: gradients against the full-batch gradient, float32 on the CPU, measured by
#: ``benchmarks/bench_distributed.py`` on an MLP, a CNN, a 2-layer Transformer encoder and an
#: LSTM with batches of 4 to 64 split in 2 or 4: at most 1.7e-6. 1e-4 leaves ~60x headroom;
#: the bugs looked for move gradients by 1e-2 and more (a summed loss by 0.5 at 2 ranks).
GRAD_RTOL = 1e-4
#: Relative tolerance between the parameters of two ranks after the step. DDP's all-reduce
#: gives every rank the same bits, so they are equal in practice; 1e-6 is a few float32 ulps
#: (eps 1.2e-7) of the parameter's norm.
SAME_RTOL = 1e-6
#: Findings name at most this many parameters, then say how many more.
MAX_NAMED = 5


def _global_norm(ts: dict) -> tuple[float, int]:
    vals = [t.double() for t in ts.values() if t is not None]
    return math.sqrt(sum(float((v * v).sum()) for v in vals)), sum(v.numel() for v in vals)


def rel_errors(x: dict, ref: dict) -> dict[str, float]:
    """Scale-free relative L2 error per tensor: ``||x - ref|| / max(||ref||, G * sqrt(n / N))``,
    ``G`` the global norm of ``ref`` over all tensors, ``N`` their total size; so a tensor whose
    reference is ~0 (a bias before BatchNorm) is judged against the model's scale, not its own."""
    total, count = _global_norm(ref)
    out = {}
    for name, r in ref.items():
        v = x.get(name)
        if r is None or v is None:
            continue
        r, v = r.double(), v.double()
        if not bool(torch.isfinite(v).all()):
            out[name] = math.inf
            continue
        diff = float(torch.linalg.vector_norm(v - r))
        scale = max(float(torch.linalg.vector_norm(r)), total * math.sqrt(r.numel() / max(count, 1)))
        out[name] = rel_l2(diff, scale)
    return out


def updates(one_or_after: dict, before: dict) -> dict:
    """Per parameter name: its value after the step minus ``before`` (float32 CPU tensors)."""
    return {n: a - before[n] for n, a in one_or_after.items() if a is not None and n in before}


def worst(errs: dict[str, float], tol: float) -> list[tuple[str, float]]:
    """``(name, error)`` of the errors beyond ``tol`` (NaN included), largest first."""
    return sorted(((n, e) for n, e in errs.items() if not e <= tol), key=lambda x: -x[1])


def listed(bad: list[tuple[str, float]]) -> str:
    """The first :data:`MAX_NAMED` names of ``bad``, then how many more."""
    shown = ", ".join(n for n, _ in bad[:MAX_NAMED])
    return shown + (f" and {len(bad) - MAX_NAMED} more" if len(bad) > MAX_NAMED else "")


def bn_zscores(calls: list, ws: int) -> list[tuple[str, str, float, int]]:
    """Per BatchNorm call: (module, type, RMS z over channels and ranks, samples per rank).

    ``z = (mean_rank - mean_all) / sqrt(s^2 / n_r * (1 - n_r / N))`` per channel: the standard
    error of a random sample of ``n_r`` of the ``N`` per-sample channel means (without
    replacement, ``s^2`` their variance). Calls whose batch does not split into ``ws`` equal
    blocks are left out."""
    out = []
    for name, kind, x in calls:
        n_all = x.shape[0]
        if n_all % ws or n_all // ws < 1 or n_all < 2:
            continue
        n_r = n_all // ws
        x = x.double()
        mean = x.mean(0)
        var = x.var(0, unbiased=True)
        se = (var / n_r * (1 - n_r / n_all)).sqrt()
        zs = []
        for r in range(ws):
            d = x[r * n_r:(r + 1) * n_r].mean(0) - mean
            ok = se > 1e-12 * (mean.abs() + 1)
            zs.append(torch.where(ok, d / torch.where(ok, se, torch.ones_like(se)), torch.zeros_like(d)))
        z = torch.stack(zs)
        out.append((name, kind, float(z.pow(2).mean().sqrt()), n_r))
    return out


def model_error(x: dict, ref: dict) -> float:
    """``||x - ref|| / ||ref||`` over every tensor both hold, concatenated (unitless)."""
    names = [n for n, r in ref.items() if r is not None and x.get(n) is not None]
    diff = math.sqrt(sum(float((x[n].double() - ref[n].double()).pow(2).sum()) for n in names))
    return rel_l2(diff, math.sqrt(sum(float(ref[n].double().pow(2).sum()) for n in names)))
