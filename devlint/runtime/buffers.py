"""How a run's buffers are judged against the reference's after the step.

A step changes more than parameters: BatchNorm's running mean and variance, an EMA copy of
the weights, a step counter. Evaluation and the next steps read them, so a buffer that a
low precision breaks (a float16 ``running_var`` that overflowed to inf) breaks training as
surely as a gradient does, though the loss and gradients of this step are fine.

Buffers (and parameters that get no gradient: an EMA teacher kept as parameters) are
compared with the reference's by the rule :mod:`devlint.runtime.compare` applies to
gradients: relative L2 error, within ``quick`` unit roundoffs at once, else within ``k``
times the same buffer's error in the noise-floor run (or its wide floor). Elements that
were finite before the step and are inf/NaN after it are counted apart: always a finding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch

from .compare import Tolerances, rel_l2, unit_roundoff

__all__ = ["StateError", "went_nonfinite", "measure_state", "judge_state"]


@dataclass
class StateError:
    """One buffer (BatchNorm running statistics, an EMA copy, a step counter), or a parameter
    that gets no gradient, of one run against the reference after the step.

    ``error`` is the relative L2 error ``||s - s_ref|| / ||s_ref||`` over the elements finite
    in both (unitless; for an integer or bool tensor, ``exact``, the fraction of elements that
    differ); ``nonfinite`` counts the elements inf/NaN here that were finite before the step
    and are finite in the reference; ``n`` is the element count.
    """

    name: str
    n: int
    error: float
    nonfinite: int = 0
    exact: bool = False


def went_nonfinite(before: torch.Tensor, after: torch.Tensor, overflow_only: bool = False) -> int:
    """How many elements of ``after`` are inf/NaN where ``before`` (the same tensor before the
    step, any device) was finite; 0 for integer tensors or a changed shape. With
    ``overflow_only`` only NaN and +inf count: a ``-inf`` may be written on purpose (a mask
    buffer filled in forward), and with no reference to compare with it cannot be told from
    an overflow."""
    if not after.is_floating_point() or after.shape != before.shape:
        return 0
    a = after.detach().to("cpu")
    if bool(torch.isfinite(a).all()):
        return 0
    bad = torch.isnan(a) | (a == float("inf")) if overflow_only else ~torch.isfinite(a)
    return int((bad & torch.isfinite(before.detach().to("cpu"))).sum())


#: Buffers of at most this many elements are measured together (:func:`_all_finite`); a
#: larger one (an EMA copy of a weight) alone, so the batch never copies much memory.
_SMALL = 1 << 16


def measure_state(ref: Mapping[str, torch.Tensor], before: Mapping[str, torch.Tensor],
                  state: Iterable[tuple[str, torch.Tensor]], cache: dict | None = None) -> dict[str, StateError]:
    """Compare a run's buffers after the step with the reference's.

    Args:
        ref: the reference's values after the step (CPU tensors) of the tensors the reference
            step changed; any other name's reference value is its ``before`` value.
        before: every tensor's value before the step (``step.model``'s own, CPU).
        state: ``(name, tensor)`` pairs of the run after its step, any device and dtype.
        cache: a dict kept for every run compared with one reference (``Raw.norms``): the
            numbers that depend on the reference alone are kept there; None: none kept.

    Returns:
        :class:`StateError` by name, only for the tensors that differ from the reference
        (floating tensors compared in float32; a changed shape is left out).
    """
    out: dict[str, StateError] = {}
    names: list[str] = []
    floating: list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]] = []
    exact: list[tuple[str, torch.Tensor, torch.Tensor]] = []
    for name, t in state:
        b = before.get(name)
        if b is None or t.shape != b.shape:
            continue
        a = t.detach().to("cpu")
        r = ref.get(name, b)
        names.append(name)
        if not a.is_floating_point():
            exact.append((name, a, r.to(a.dtype)))
        elif a.numel() > _SMALL:
            _one(name, a, r, b, ref, before, out)
        else:
            floating.append((name, a, r, b))
    if exact and not _all_equal(exact):
        for name, a, r in exact:
            if not torch.equal(a, r):
                out[name] = StateError(name, a.numel(), float((a != r).sum()) / max(a.numel(), 1), exact=True)
    if floating and not _all_finite(floating, ref, before, out, {} if cache is None else cache):
        for name, a, r, b in floating:
            _one(name, a, r, b, ref, before, out)
    return {n: out[n] for n in names if n in out}  # in the order of ``state``


def _all_equal(exact: list) -> bool:
    """Whether every integer or bool tensor equals its reference (``(name, run, reference)``,
    the reference in the run's dtype), in one comparison (a step counter per BatchNorm)."""
    if len(exact) == 1:
        return torch.equal(exact[0][1], exact[0][2])
    return torch.equal(torch.cat([a.reshape(-1).long() for _, a, _ in exact]),
                       torch.cat([r.reshape(-1).long() for _, _, r in exact]))


def _one(name: str, a: torch.Tensor, r: torch.Tensor, b: torch.Tensor, ref: Mapping, before: Mapping,
         out: dict) -> None:
    """One floating buffer, any values (inf/NaN counted apart)."""
    a, r = a.float(), r.float()
    if torch.equal(a, r):
        return
    fin = torch.isfinite(a) & torch.isfinite(r)
    bad = int((~torch.isfinite(a) & torch.isfinite(b.float()) & torch.isfinite(r)).sum())
    d, rr = (a - r)[fin].double(), r[fin].double()
    out[name] = StateError(name, a.numel(), rel_l2(float(d.norm()), _scale(name, rr, fin, ref, before)), bad)


def _all_finite(floating: list, ref: Mapping, before: Mapping, out: dict, cache: dict) -> bool:
    """The floating buffers measured together when every element of the run and the
    reference is finite (the usual case: one pass over all of them instead of a dozen small
    ops per buffer, ~0.5 plain steps a run on an EfficientNet-like model's ~150 BatchNorm
    buffers; at most :data:`_SMALL` elements each, so the float64 copies stay small); the same numbers as :func:`_one` (each norm is still one tensor's
    ``linalg.vector_norm`` in float64). False, having measured nothing, when some element is
    inf/NaN."""
    sizes = [a.numel() for _, a, _, _ in floating]
    run = torch.cat([a.reshape(-1).float() for _, a, _, _ in floating])
    refs = torch.cat([r.reshape(-1).float() for _, _, r, _ in floating])
    if not bool(torch.isfinite(run).all()) or not bool(torch.isfinite(refs).all()):
        return False
    diffs = torch._foreach_norm(list(torch.split((run - refs).double(), sizes)))
    ref_norms = torch._foreach_norm(list(torch.split(refs.double(), sizes)))
    for (name, a, r, _), d, rn in zip(floating, diffs, ref_norms):
        d = float(d)
        if d == 0.0:  # finite a == r everywhere (torch.equal)
            continue
        norm = float(rn)
        if name.endswith("running_mean"):
            std = cache.get(("running std", name))
            if std is None:
                var = ref.get(name[: -len("mean")] + "var", before.get(name[: -len("mean")] + "var"))
                std = float(var.detach().to("cpu").double().clamp_min(0).sqrt().norm()) \
                    if var is not None and var.shape == a.shape else 0.0
                cache[("running std", name)] = std
            norm = max(norm, std)
        out[name] = StateError(name, a.numel(), rel_l2(d, norm), 0)
    return True


def _scale(name: str, r: torch.Tensor, fin: torch.Tensor, ref: Mapping, before: Mapping) -> float:
    """The norm a buffer's error is measured against: its reference's, except for a
    BatchNorm ``running_mean``, measured in units of the same layer's running standard
    deviation (what the mean is subtracted from before dividing by it). A BatchNorm after a
    bias-free 1x1 convolution of a BatchNorm's output (EfficientNet's and MobileNet's
    blocks) has a running mean that is 0 up to float32 rounding (~1e-10): any low
    precision's ~1e-5 is then a relative error of ~1e4 that changes nothing."""
    norm = float(r.norm())
    if name.endswith("running_mean"):
        var = ref.get(name[: -len("mean")] + "var", before.get(name[: -len("mean")] + "var"))
        if var is not None and var.shape == fin.shape:
            norm = max(norm, float(var.detach().to("cpu").double()[fin].clamp_min(0).sqrt().norm()))
    return norm


def judge_state(errors: Mapping[str, StateError], mode: str, tol: Tolerances,
                floor: Mapping[str, StateError] | None = None,
                wide_floor: Mapping[str, StateError] | None = None) -> list[tuple[str, float, float]]:
    """The buffers of a run beyond tolerance, as ``(name, error, limit)``, worst first.

    The rule of :func:`judge`, per buffer: within ``tol.quick`` unit roundoffs passes at once
    (never for an integer or bool buffer: those must be equal); otherwise, with the noise-floor
    run's errors ``floor``, within ``tol.k`` times that buffer's floor error, or within the
    wide floor's error. Without ``floor`` every buffer beyond the quick bound is returned (the
    caller then measures the floor). Buffers that went inf/NaN are not listed (see
    :attr:`StateError.nonfinite`): they are findings of their own.
    """
    quick = tol.quick * unit_roundoff(mode)
    out = []
    for name, e in errors.items():
        if e.nonfinite or (not e.exact and e.error <= quick):
            continue
        if floor is None:
            out.append((name, e.error, 0.0 if e.exact else quick))
            continue
        f = floor.get(name)
        limit = tol.k * (f.error if f is not None else 0.0)
        w = (wide_floor or {}).get(name)
        if w is not None:
            limit = max(limit, w.error)
        if not e.error <= limit:
            out.append((name, e.error, limit))
    return sorted(out, key=lambda x: -x[1] / max(x[2], 1e-30))
