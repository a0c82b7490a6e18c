"""How a run is judged against the float32 reference: calibrated, scale-free tolerances.

The public functions here are the whole comparison; :mod:`devlint.runtime.runs` and
:mod:`devlint.runtime.distributed` both use them:

1. :func:`measure` compares one run's gradients (and updates) with the reference, one
   parameter at a time (streamed: a candidate tensor is moved to the CPU, compared and
   dropped), and returns small per-parameter statistics (:class:`Errors`).
2. :func:`needs_floor` says whether those errors are small enough to pass without
   calibration (every error within ``k`` unit roundoffs of the dtype).
3. Otherwise the caller measures the *noise floor*: the same step in float32 with only the
   dtype's rounding applied (parameters and floating-point inputs rounded to the dtype and
   back, all compute in float32), compared with :func:`measure` too.
4. :func:`judge` turns the errors (and the floor) into a :class:`Verdict`.

Where the numbers come from (all in :class:`Tolerances`, all overridable):

- ``k = 16``: on the 14 correct models of the test zoo (``fixtures/runtime/zoo.py``), the
  autocast error of a parameter's gradient is at most 5.3x its noise floor (bfloat16 and
  float16, CPU; 3.1x for the whole model); 16 is three times that margin. The planted
  unstable module (``NaiveNorm``) is 1e4-1e5x its floor.
- ``negligible = 1e-3``: a parameter whose reference gradient RMS is below 1e-3 of the model's
  gradient RMS is not judged (a Linear bias right before BatchNorm, an attention key bias:
  their true gradient is zero, so any relative error of theirs is noise). They are counted.
- ``unit roundoff`` ``u = eps / 2`` of the dtype (``torch.finfo(dtype).eps / 2``: 2**-9 for
  bfloat16, 2**-11 for float16, 2**-24 for float32) scales the no-calibration shortcut and
  the loss check.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import torch

__all__ = ["Tolerances", "DEFAULT_TOLERANCES", "resolve_tolerances", "ParamError", "Errors",
           "Verdict", "measure", "needs_floor", "judge", "unit_roundoff", "round_trip"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def unit_roundoff(mode: str) -> float:
    """Unit roundoff ``eps / 2`` of a mode's dtype (unitless): 2**-24, 2**-9, 2**-11."""
    return torch.finfo(_DTYPES[mode]).eps / 2


def round_trip(t: torch.Tensor, mode: str) -> torch.Tensor:
    """``t`` rounded to the mode's dtype and back to its own dtype (floating tensors only)."""
    if not t.is_floating_point() or mode == "float32":
        return t
    return t.to(_DTYPES[mode]).to(t.dtype)


@dataclass(frozen=True)
class Tolerances:
    """How far a run may be from the float32 reference (see the module docstring for sources).

    A parameter's gradient error is ``e = ||g - g_ref||_2 / ||g_ref||_2`` (relative L2, float64
    on the CPU). A run passes when every judged parameter has ``e <= k * max(f_p, F)``, where
    ``f_p`` is that parameter's error in the noise-floor run and ``F`` the whole model's
    (``||g_floor - g_ref|| / ||g_ref||`` over all judged parameters). The same rule judges
    updates ``params_after - params_before`` for optimizers whose update is linear in the
    gradient (SGD); for adaptive ones (Adam, RMSprop, ...) the first update is about
    ``lr * sign(g)``, so updates are reported in units of ``lr`` and not judged. The loss
    passes when ``|loss - loss_ref| / |loss_ref| <= k * max(floor loss error, u)``.

    Without a floor run (every error already within ``quick * u``, ``u`` the unit roundoff)
    a run passes at once.

    Attributes:
        k: how many times its noise floor an error may be (unitless). Default 16.
        quick: errors within ``quick * u`` pass without calibration (unitless). Default 8:
            the largest per-parameter autocast error in the zoo's transformers is ~5 u.
        negligible: parameters whose reference gradient RMS is below ``negligible`` times
            the model's gradient RMS are not judged (unitless). Default 1e-3.
        underflow: float16 only: the fraction (0..1) of gradient elements that are zero in
            the run but non-zero in float32 above which devlint reports ``underflow``
            (0.1 %, devlint's choice).
        float32_rtol: float32 runs on another device (or the CPU float32 run of a custom
            step) are judged against a fixed relative error instead, default 1e-4: float32
            kernels of different devices differ by reduction order, ~sqrt(n) * 2**-24.
    """

    k: float = 16.0
    quick: float = 8.0
    negligible: float = 1e-3
    underflow: float = 1e-3
    float32_rtol: float = 1e-4


DEFAULT_TOLERANCES: dict[str, Tolerances] = {m: Tolerances() for m in _DTYPES}


def resolve_tolerances(tolerances) -> dict[str, Tolerances]:
    """Merge user tolerances into the defaults.

    ``tolerances`` is None (defaults), one :class:`Tolerances` for every mode, or a mapping
    from mode name (``"float32"``, ``"bfloat16"``, ``"float16"``) to :class:`Tolerances`.

    Raises:
        TypeError: ``tolerances`` is none of these.
        ValueError: a mapping names an unknown mode.
    """
    merged = dict(DEFAULT_TOLERANCES)
    if tolerances is None:
        return merged
    if isinstance(tolerances, Tolerances):
        return {mode: tolerances for mode in merged}
    if not isinstance(tolerances, Mapping):
        raise TypeError("tolerances must be a Tolerances or a dict of mode -> Tolerances")
    for mode, tol in tolerances.items():
        if mode not in merged:
            raise ValueError(f"unknown mode {mode!r} in tolerances; use one of {sorted(merged)}")
        if not isinstance(tol, Tolerances):
            raise TypeError(f"tolerances[{mode!r}] must be a Tolerances")
        merged[mode] = tol
    return merged


@dataclass
class ParamError:
    """One parameter of one run against the reference.

    ``grad`` and ``update`` are relative L2 errors (unitless; ``inf`` for a non-finite or
    missing tensor where the reference has one); ``update_lr`` is the update error's RMS in
    units of that parameter's learning rate; ``ref_rms`` the reference gradient's RMS (the
    gradient's units); ``zeros`` the count of elements that are zero here but not in the
    reference; ``n`` the element count.
    """

    name: str
    n: int
    grad: float
    update: float
    update_lr: float | None
    ref_rms: float
    zeros: int = 0
    sq_diff: float = 0.0  # ||g - g_ref||^2, for the whole-model error
    sq_ref: float = 0.0  # ||g_ref||^2


@dataclass
class Errors:
    """Per-parameter errors of one run (:func:`measure`) and the loss error.

    ``params`` holds every parameter that has a reference gradient; ``missing`` the names
    whose gradient is present in only one of the two runs.
    """

    loss: float
    params: dict[str, ParamError] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def judged(self, tol: Tolerances) -> dict[str, ParamError]:
        """The parameters whose reference gradient is not negligible (see :class:`Tolerances`)."""
        n = sum(p.n for p in self.params.values())
        sq = sum(p.sq_ref for p in self.params.values())
        rms = math.sqrt(sq / n) if n else 0.0
        return {k: p for k, p in self.params.items() if p.ref_rms > tol.negligible * rms}

    def model_error(self, tol: Tolerances) -> float:
        """``||g - g_ref|| / ||g_ref||`` over the judged parameters (unitless)."""
        judged = self.judged(tol).values()
        ref = sum(p.sq_ref for p in judged)
        if not all(math.isfinite(p.grad) for p in judged):
            return math.inf
        return math.sqrt(sum(p.sq_diff for p in judged) / ref) if ref > 0 else 0.0


def _rel(diff: float, ref: float) -> float:
    if ref > 0:
        return diff / ref
    return 0.0 if diff == 0 else math.inf


def measure(ref_loss: float, ref_grads: Mapping[str, torch.Tensor | None],
            ref_updates: Mapping[str, torch.Tensor], loss: float,
            grads: Iterable[tuple[str, torch.Tensor | None]],
            updates: Mapping[str, torch.Tensor] | None = None,
            lrs: Mapping[str, float] | None = None) -> Errors:
    """Compare one run with the reference, parameter by parameter.

    Args:
        ref_loss, loss: the losses (floats).
        ref_grads, ref_updates: the reference gradients and updates by parameter name
            (float32 CPU tensors; a gradient may be None).
        grads: ``(name, gradient)`` pairs of the run, on any device and dtype; each is
            moved to the CPU as float64 only while it is compared (no copy of the run is kept).
        updates: the run's updates by name (any device), or None to skip updates.
        lrs: each parameter's learning rate, for :attr:`ParamError.update_lr`.

    Returns:
        :class:`Errors`. A non-finite run tensor gives an ``inf`` error.
    """
    out = Errors(loss=_rel(abs(loss - ref_loss), abs(ref_loss)) if math.isfinite(loss) else math.inf)
    for name, g in grads:
        g_ref = ref_grads.get(name)
        if (g is None) != (g_ref is None):
            out.missing.append(name)
            continue
        if g is None:
            continue
        r = g_ref.double()
        x = g.detach().to("cpu", torch.float64)
        sq_ref = float(r.pow(2).sum())
        finite = bool(torch.isfinite(x).all())
        sq_diff = float((x - r).pow(2).sum()) if finite else math.inf
        zeros = int(((x == 0) & (r != 0)).sum())
        upd = upd_lr = math.nan
        if updates is not None and name in updates and name in ref_updates:
            u = updates[name].detach().to("cpu", torch.float64)
            ur = ref_updates[name].double()
            du = float(torch.linalg.vector_norm(u - ur)) if bool(torch.isfinite(u).all()) else math.inf
            upd = _rel(du, float(torch.linalg.vector_norm(ur)))
            lr = (lrs or {}).get(name)
            upd_lr = du / (lr * math.sqrt(max(r.numel(), 1))) if lr else None
        out.params[name] = ParamError(name, r.numel(), _rel(math.sqrt(sq_diff), math.sqrt(sq_ref)),
                                      upd, upd_lr, math.sqrt(sq_ref / max(r.numel(), 1)), zeros,
                                      sq_diff, sq_ref)
    return out


def needs_floor(errors: Errors, mode: str, tol: Tolerances) -> bool:
    """True when some judged error exceeds ``tol.quick`` unit roundoffs, so the run can only be
    judged against a measured noise floor (float32 never needs one)."""
    if mode == "float32":
        return False
    limit = tol.quick * unit_roundoff(mode)
    judged = errors.judged(tol).values()
    return (bool(errors.missing) or errors.loss > limit
            or any(not (p.grad <= limit) for p in judged))


@dataclass
class Verdict:
    """The judgement of one run (:func:`judge`).

    Attributes:
        ok: the run is within tolerance.
        grad_err: the whole-model gradient relative L2 error (unitless).
        floor: the whole-model error of the noise-floor run, ``None`` when not measured.
        worst: ``(name, error, threshold)`` of the parameters beyond tolerance, worst first
            (relative to their threshold); empty when ``ok``.
        update_err: the largest judged update relative error, or for adaptive optimizers the
            largest update error in units of lr (see ``update_judged``).
        update_judged: False when updates were not judged (adaptive optimizer).
        excluded: how many parameters were not judged (negligible reference gradient).
        loss_err: the loss relative error; ``loss_ok`` whether it is within tolerance.
        how: one line saying how the run was judged (for the report).
    """

    ok: bool
    grad_err: float
    floor: float | None
    worst: list[tuple[str, float, float]]
    update_err: float | None
    update_judged: bool
    excluded: int
    loss_err: float
    loss_ok: bool
    how: str
    missing: list[str] = field(default_factory=list)


def judge(errors: Errors, mode: str, tol: Tolerances, floor: Errors | None = None,
          adaptive: bool = False, fixed_rtol: float | None = None) -> Verdict:
    """Judge a run's :class:`Errors` (see :class:`Tolerances` for the rule).

    Args:
        errors: the run's errors from :func:`measure`.
        mode: ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        tol: the mode's :class:`Tolerances`.
        floor: the noise-floor run's errors; when None the run is judged by the quick bound
            ``tol.quick * u`` (or ``fixed_rtol`` when given, e.g. float32 across devices).
        adaptive: the optimizer is adaptive (Adam-like): updates are reported, not judged.
        fixed_rtol: judge every relative error against this bound instead.

    Returns:
        a :class:`Verdict`; never raises for finite or infinite errors.
    """
    judged = errors.judged(tol)
    excluded = len(errors.params) - len(judged)
    model_err = errors.model_error(tol)
    if fixed_rtol is not None:
        limit_of = lambda _name, _kind: fixed_rtol  # noqa: E731
        loss_limit = fixed_rtol
        how = f"relative error within {fixed_rtol:g}"
        floor_err = None
    elif floor is None:
        q = tol.quick * unit_roundoff(mode)
        limit_of = lambda _name, _kind: q  # noqa: E731
        loss_limit = q
        how = f"within {tol.quick:g} unit roundoffs of {mode} ({q:.1e}), no calibration needed"
        floor_err = None
    else:
        floor_err = floor.model_error(tol)
        upd_floor = max((p.update for p in floor.judged(tol).values() if math.isfinite(p.update)),
                        default=0.0)

        def limit_of(name, kind):
            fp = floor.params.get(name)
            if kind == "grad":
                own = fp.grad if fp else 0.0
                return tol.k * max(own if math.isfinite(own) else 0.0, floor_err)
            own = fp.update if fp else 0.0
            return tol.k * max(own if math.isfinite(own) else 0.0, upd_floor)

        loss_limit = tol.k * max(floor.loss, unit_roundoff(mode))
        how = (f"within {tol.k:g}x the noise floor of {mode} rounding on this model "
               f"(floor {floor_err:.1e})")
    worst = []
    for name, p in judged.items():
        limit = limit_of(name, "grad")
        if not p.grad <= limit:
            worst.append((name, p.grad, limit))
        elif not adaptive and math.isfinite(limit_of(name, "update")) and not math.isnan(p.update):
            ul = limit_of(name, "update")
            if not p.update <= ul:
                worst.append((name + " (update)", p.update, ul))
    worst.sort(key=lambda w: -(w[1] / w[2]) if w[2] > 0 else -math.inf)
    if adaptive:
        ups = [p.update_lr for p in judged.values() if p.update_lr is not None]
        update_err = max(ups, default=None)
    else:
        ups = [p.update for p in judged.values() if not math.isnan(p.update)]
        update_err = max(ups, default=None)
    loss_ok = errors.loss <= loss_limit
    if adaptive:
        how += "; judged on gradients (adaptive optimizer: first update ~ lr*sign(g); update err in lr units)"
    ok = not worst and loss_ok and not errors.missing
    return Verdict(ok, model_err, floor_err, worst, update_err, not adaptive, excluded, errors.loss,
                   loss_ok, how, list(errors.missing))


def with_overrides(tol: Tolerances, **changes) -> Tolerances:
    """A copy of ``tol`` with the given fields changed (``k=32`` ...); unknown names raise TypeError."""
    return replace(tol, **changes)
