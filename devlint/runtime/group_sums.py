"""The sums a run's comparison needs, taken for many small tensors at once.

:func:`devlint.runtime.compare.measure` needs, per parameter, ``||x - r||^2``, ``||r||^2``,
``<x, r>``, ``||x||^2`` and (float16) the count of elements zero in the run but not in the
reference. Taken one tensor at a time that is a dozen Python-dispatched ops per parameter
(~30 us each group of them, ~0.2 plain steps a run of a model with hundreds of small
parameters: biases, norms, depthwise kernels); :func:`group_sums` takes them for a group of
tensors with a few ops in all.
"""

from __future__ import annotations

import math

import torch

__all__ = ["cat_float32", "group_sums"]

_FLOAT32_MAX = torch.finfo(torch.float32).max


def _f32(v: float) -> float:
    """A float64 sum as a float32 dot ends: beyond float32's range it is +-inf."""
    return math.copysign(math.inf, v) if abs(v) > _FLOAT32_MAX else v


def cat_float32(flats: list) -> torch.Tensor:
    """Flat tensors concatenated, as float32 on the CPU (each moved first when they are on
    several devices)."""
    if len({t.device for t in flats}) > 1:
        flats = [t.to("cpu") for t in flats]
    return torch.cat(flats).to("cpu", torch.float32)


def group_sums(runs: list, refs: list, zeros: bool, with_ref: bool = True) -> list[tuple]:
    """Per pair of flat tensors ``(x, r)`` (``runs[i]`` any device and floating dtype,
    ``refs[i]`` the reference's, the same element count), ``(||x - r||^2, ||r||^2 (None
    unless with_ref), #(x == 0 and r != 0) (0 unless zeros), <x, r>, ||x||^2)``.

    The elements are compared in float32 (as the one-tensor path,
    ``devlint.runtime.compare._sq_sums``), every sum is taken per tensor in float64 (one
    ``torch.segment_reduce``; float32 products are exact in float64) where the one-tensor path
    sums a float32 ``torch.dot``: the two differ by that dot's rounding (~1e-7 relative). A sum
    beyond float32's range is +-inf, as the float32 dot's; a NaN ``||x - r||^2`` is ``inf``.
    Memory: a few float64 copies of the group (keep groups small).
    """
    with torch.no_grad():
        a, b = cat_float32(runs), cat_float32(refs)
        d = a - b
        ad, bd, dd = a.double(), b.double(), d.double()
        rows = [dd * dd, ad * bd, ad * ad, bd * bd] if with_ref else [dd * dd, ad * bd, ad * ad]
        if zeros:
            rows.append(((a == 0) & (b != 0)).double())
        rows = torch.stack(rows)
    lengths = torch.tensor([[r.numel() for r in refs]]).expand(len(rows), -1).contiguous()
    sums = torch.segment_reduce(rows, "sum", lengths=lengths, axis=1).tolist()
    out = []
    for i in range(len(refs)):
        sq_diff = _f32(sums[0][i]) if math.isfinite(sums[0][i]) else math.inf
        out.append((sq_diff, _f32(sums[3][i]) if with_ref else None, int(sums[-1][i]) if zeros else 0,
                    _f32(sums[1][i]), _f32(sums[2][i])))
    return out
