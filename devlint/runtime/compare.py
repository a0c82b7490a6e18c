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
4. :func:`judge` turns the errors (and the floor) into a :class:`Verdict`. A run beyond
   ``k`` times its floor is judged once more with the *wide floor*: the floor run with every
   rounding error scaled by ``k`` (:class:`Rounding`), for gradients with kinks (ReLU after
   BatchNorm, max-pooling, top-k routing), which ``k * F`` does not extrapolate.

Where the numbers come from (all in :class:`Tolerances`, all overridable):

- ``k = 24``: on the 14 correct models of the test zoo (``fixtures/runtime/zoo.py``) the
  whole-model autocast error is at most 3.1x its noise floor (bfloat16 and float16, CPU), and
  at most 7.3x on 23 more Hugging Face architectures tried by hand (DINOv2 in float16); 24
  leaves a margin of 3. The planted unstable module (``NaiveNorm``) is 2e4x its floor. On
  the wide zoo (``fixtures/runtime/zoo_wide.py``, 39 more architectures, seeds 0-3) the
  smooth models stay within 3x; the kinked ones (SegFormer in float16: 142x, the zoo's
  Linear->BatchNorm MLP at seed 2: 85x) are within their wide floor.
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
from dataclasses import dataclass, field

import torch

from .group_sums import cat_float32, group_sums

__all__ = ["Tolerances", "DEFAULT_TOLERANCES", "resolve_tolerances", "ParamError", "Errors",
           "Verdict", "Rounding", "Delta", "CHUNK", "measure", "needs_floor", "judge", "unit_roundoff",
           "round_trip", "round_range", "FLOAT16_TINY", "rel_l2", "DTYPES"]

#: The precision modes and the dtype each computes in.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def unit_roundoff(mode: str) -> float:
    """Unit roundoff ``eps / 2`` of a mode's dtype (unitless): 2**-24, 2**-9, 2**-11."""
    return torch.finfo(DTYPES[mode]).eps / 2


@dataclass(frozen=True)
class Rounding:
    """The rounding of ``mode`` with its error scaled: ``x + scale * (round(x) - x)``.

    Passed where a mode name is, to :func:`round_trip` (the noise-floor run's ``round_to``):
    ``Rounding("bfloat16", 24)`` perturbs every element by 24 times its own bfloat16 rounding
    error, in the rounding's direction (the values are no longer bfloat16 values; the floor
    run computes in float32 anyway).
    """

    mode: str
    scale: float = 1.0


def round_trip(t: torch.Tensor, mode: str | Rounding) -> torch.Tensor:
    """``t`` rounded to the mode's dtype and back to its own dtype (floating tensors only);
    for a :class:`Rounding`, ``t`` moved by ``scale`` times that rounding error."""
    scale = 1.0
    if isinstance(mode, Rounding):
        mode, scale = mode.mode, mode.scale
    if not t.is_floating_point() or mode == "float32":
        return t
    r = t.to(DTYPES[mode]).to(t.dtype)
    if scale == 1.0:
        return r
    d = r - t
    return torch.where(torch.isfinite(d), t + scale * d, r)  # inf stays inf, NaN NaN


#: float16's smallest normal number (2**-14): below it float16 holds only subnormals, spaced
#: 2**-24 apart, so a value there keeps fewer significant bits the smaller it is.
FLOAT16_TINY = 2.0 ** -14


def round_range(t: torch.Tensor, mode: str | Rounding) -> torch.Tensor:
    """``t`` with what the mode's *range* costs it: for float16, the elements below 2**-14 in
    magnitude rounded to float16's subnormal grid (multiples of 2**-24; below 2**-25 they
    become 0), every other element unchanged; for bfloat16 and float32 (float32's exponent
    range) ``t`` itself. The float16 noise floor applies it to every module's output: autocast
    hands activations between modules in float16, and a model whose activations sit below
    2**-14 (Hugging Face MobileViT's tiny configs at init: attention outputs ~3e-7) loses
    precision there that no rounding of parameters and inputs shows.

    The gradient passes straight through, and no memory is added to the graph: an output
    made in this forward (it has a ``grad_fn`` and is no view) is rounded in place, behind
    autograd's back (``.data``: a backward that reads the saved output, ReLU's or softmax's,
    then reads the rounded values, as it would in float16); any other tensor (a parameter, a
    buffer, a view of one, an input handed on) is left alone and ``t + (rounded - t)`` is
    returned, the difference detached (exact: ``rounded - t`` is, by Sterbenz's lemma), or
    ``t`` itself when no element changes."""
    if isinstance(mode, Rounding):
        mode = mode.mode
    if mode != "float16" or not t.is_floating_point() or t.dtype == torch.float16:
        return t
    with torch.no_grad():
        data = t.detach()
        # float16's subnormals are the multiples of 2**-24: rounding to them is rounding
        # x * 2**24 to an integer, ties to even, as the conversion to float16 rounds (exact:
        # scaling by a power of two); no masked indexing, 2-3x cheaper per module output
        tiny = data.abs() < FLOAT16_TINY
        rounded = torch.where(tiny, (data * 2.0 ** 24).round_().mul_(2.0 ** -24), data)
        if t.grad_fn is not None and t._base is None:
            t.data.copy_(rounded)
            return t
        if torch.equal(rounded, data):
            return t
        delta = rounded.sub_(data)
    return t + delta


@dataclass(frozen=True)
class Tolerances:
    """How far a run may be from the float32 reference (see the module docstring for sources).

    The whole-model gradient error is ``E = ||g - g_ref||_2 / ||g_ref||_2`` over all judged
    parameters concatenated (relative to the model's gradient norm: scale-free; float64 on the
    CPU). A run passes at once when every judged parameter's own relative error is within
    ``quick * u`` (``u`` the unit roundoff); otherwise when ``E <= k * F``, ``F`` the same error
    of the noise-floor run, or else when ``E`` is within the error of the wide floor (the
    rounding errors scaled by ``k``, see :func:`judge`). The same rule judges updates
    ``params_after - params_before`` for ``torch.optim.SGD``, whose update is linear in the
    gradient; for every other optimizer (Adam, Adafactor, RMSprop, ...) the first update is
    about ``lr * sign(g)``, so updates are reported in units of ``lr`` and not judged. The loss
    passes when ``|loss - loss_ref| / |loss_ref| <= k * max(floor loss error, u)`` (or within
    the wide floor's loss error).

    Attributes:
        k: how many times its noise floor an error may be (unitless). Default 24.
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

    k: float = 24.0
    quick: float = 8.0
    negligible: float = 1e-3
    underflow: float = 1e-3
    float32_rtol: float = 1e-4


DEFAULT_TOLERANCES: dict[str, Tolerances] = {m: Tolerances() for m in DTYPES}


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
    sq_udiff: float = 0.0  # ||u - u_ref||^2
    sq_uref: float = 0.0  # ||u_ref||^2
    dot: float = 0.0  # <g, g_ref>, for Errors.uniform_factor
    sq_run: float = 0.0  # ||g||^2, for Errors.uniform_factor


@dataclass
class Errors:
    """Per-parameter errors of one run (:func:`measure`) and the loss error.

    ``params`` holds every parameter that has a reference gradient; ``missing`` the names
    whose gradient is present in only one of the two runs.
    """

    loss: float
    params: dict[str, ParamError] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    state: dict = field(default_factory=dict)  # buffers: name -> buffers.StateError

    def judged(self, tol: Tolerances) -> dict[str, ParamError]:
        """The parameters whose reference gradient is not negligible (see :class:`Tolerances`)."""
        n = sum(p.n for p in self.params.values())
        sq = sum(p.sq_ref for p in self.params.values())
        rms = math.sqrt(sq / n) if n else 0.0
        return {k: p for k, p in self.params.items() if p.ref_rms > tol.negligible * rms}

    def model_error(self, tol: Tolerances, update: bool = False) -> float:
        """``||g - g_ref|| / ||g_ref||`` over the judged parameters, all concatenated
        (unitless); with ``update`` the same for the updates."""
        judged = list(self.judged(tol).values())
        diff = sum((p.sq_udiff if update else p.sq_diff) for p in judged)
        ref = sum((p.sq_uref if update else p.sq_ref) for p in judged)
        if not math.isfinite(diff):
            return math.inf
        return math.sqrt(diff / ref) if ref > 0 else (0.0 if diff == 0 else math.inf)

    def uniform_factor(self, tol: Tolerances) -> tuple[float, float] | None:
        """``(c, r)``: the least-squares factor ``c`` with ``g ~ c * g_ref`` over the judged
        parameters concatenated, and the relative residual ``r = ||g - c g_ref|| / ||c g_ref||``
        (unitless); None when undefined (no reference norm, non-finite errors, ``c = 0``). A
        run whose every gradient is the reference's times one ``c`` far from 1, with ``r`` at
        the rounding level, was rescaled by the step (clipping before ``unscale_``), not
        broken by precision."""
        judged = list(self.judged(tol).values())
        ref = sum(p.sq_ref for p in judged)
        run = sum(p.sq_run for p in judged)
        dot = sum(p.dot for p in judged)
        if not (ref > 0 and math.isfinite(run) and math.isfinite(dot)) or dot == 0:
            return None
        # ||g - c g_ref||^2 / ||c g_ref||^2 = (||g||^2 ||g_ref||^2 - <g, g_ref>^2) / <g, g_ref>^2
        return dot / ref, math.sqrt(max(run * ref - dot * dot, 0.0)) / abs(dot)


def rel_l2(diff: float, ref: float) -> float:
    """The relative error ``diff / ref`` of two norms (unitless): 0 when both are 0, ``inf``
    when only the reference is 0."""
    if ref > 0:
        return diff / ref
    return 0.0 if diff == 0 else math.inf



#: Elements compared at a time by :func:`measure` (float32 chunks of 1 MiB): the comparison's
#: extra memory stays a few MiB whatever the size of the largest parameter.
CHUNK = 1 << 18


class Delta:
    """A lazy update ``after - before`` (``after`` on any device and dtype, ``before`` on the
    CPU), optionally with ``before`` rounded to a mode's dtype first (the noise-floor run):
    :func:`measure` reads it in float32 chunks, so the update is never materialised."""

    __slots__ = ("after", "before", "round_to")

    def __init__(self, after: torch.Tensor, before: torch.Tensor, round_to: str | None = None):
        self.after, self.before, self.round_to = after, before, round_to

    def numel(self) -> int:
        """The element count."""
        return self.after.numel()

    def chunk(self, i: int, j: int) -> torch.Tensor:
        """Elements ``i:j`` of the flattened update, float32 on the CPU."""
        b = _flat(self.before)[i:j].float()
        if self.round_to:
            b = round_trip(b, self.round_to)
        return _chunk(self.after, i, j) - b


def _flat(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return t.reshape(-1) if t.is_contiguous() else t.contiguous().reshape(-1)


def _chunk(t, i: int, j: int) -> torch.Tensor:
    if isinstance(t, Delta):
        return t.chunk(i, j)
    return _flat(t)[i:j].to("cpu", torch.float32)


def _sq_sums(x, r: torch.Tensor, zeros: bool, sq_ref: float | None = None) -> tuple[float, float, int, float, float]:
    """``(||x - r||^2, ||r||^2, #(x == 0 and r != 0), <x, r>, ||x||^2)``, chunk by chunk (float32
    within a chunk, summed in float64); the first is ``inf`` when ``x`` holds inf/NaN; the
    count is 0 unless ``zeros``. ``sq_ref``: ``||r||^2`` if already known (not computed again)."""
    known = sq_ref is not None
    sq_diff, sq_ref = 0.0, (sq_ref if known else 0.0)
    lost, dot, sq_run = 0, 0.0, 0.0
    n = r.numel()
    for i in range(0, n, CHUNK):
        a = _chunk(x, i, i + CHUNK)
        b = _flat(r)[i:i + CHUNK].float()
        d = a - b
        sq_diff += float(torch.dot(d, d))
        dot += float(torch.dot(a, b))
        sq_run += float(torch.dot(a, a))
        if not known:
            sq_ref += float(torch.dot(b, b))
        if zeros:
            lost += int(torch.count_nonzero(b[a == 0]))
    if not math.isfinite(sq_diff):
        sq_diff = math.inf
    return sq_diff, sq_ref, lost, dot, sq_run


def measure(ref_loss: float, ref_grads: Mapping[str, torch.Tensor | None],
            ref_updates: Mapping[str, torch.Tensor], loss: float,
            grads: Iterable[tuple[str, torch.Tensor | None]],
            updates: Mapping[str, torch.Tensor | Delta] | None = None,
            lrs: Mapping[str, float] | None = None, zeros: bool = True,
            norms: dict | None = None) -> Errors:
    """Compare one run with the reference, parameter by parameter.

    Args:
        ref_loss, loss: the losses (floats).
        ref_grads, ref_updates: the reference gradients and updates by parameter name
            (float32 CPU tensors; a gradient may be None).
        grads: ``(name, gradient)`` pairs of the run, on any device and dtype; each is
            read in float32 chunks of :data:`CHUNK` elements moved to the CPU (no copy of the
            run is kept, and the comparison's own memory is a few MiB); squared norms are
            summed in float64 across chunks.
        updates: the run's updates by name (tensors on any device, or :class:`Delta`), or
            None to skip updates.
        lrs: each parameter's learning rate, for :attr:`ParamError.update_lr`.
        zeros: count :attr:`ParamError.zeros` (float16 underflow); else they are 0.
        norms: a dict to keep the reference tensors' squared norms in, filled on first use:
            pass the same dict for every run compared with one reference (one pass over
            the reference less per run), or None.

    Returns:
        :class:`Errors`. A non-finite run tensor gives an ``inf`` error.

    Raises:
        RuntimeError: a gradient's element count differs from the reference's.
    """
    out = Errors(loss=rel_l2(abs(loss - ref_loss), abs(ref_loss)) if math.isfinite(loss) else math.inf)
    known = norms if norms is not None else {}
    jobs = []
    for name, g in grads:
        g_ref = ref_grads.get(name)
        if (g is None) != (g_ref is None):
            out.missing.append(name)
            continue
        if g is None:
            continue
        if g.numel() != g_ref.numel():
            raise RuntimeError(f"gradient of {name} has {g.numel()} elements, the reference {g_ref.numel()}")
        upd = updates[name] if updates is not None and name in updates and name in ref_updates else None
        jobs.append((name, g, g_ref, upd))
    grad_sums = _sums_of([(("grad", name), g, g_ref) for name, g, g_ref, _ in jobs], zeros, known)
    upd_sums = _sums_of([(("update", name), u, ref_updates[name]) for name, _, _, u in jobs if u is not None],
                        False, known)
    for name, g, g_ref, u in jobs:
        n = g_ref.numel()
        sq_diff, sq_ref, lost, dot, sq_run = grad_sums[("grad", name)]
        upd = upd_lr = math.nan
        du = nu = 0.0
        if u is not None:
            sq_du, sq_nu, _, _, _ = upd_sums[("update", name)]
            du, nu = math.sqrt(sq_du), math.sqrt(sq_nu)
            upd = rel_l2(du, nu)
            lr = (lrs or {}).get(name)
            upd_lr = du / (lr * math.sqrt(max(n, 1))) if lr else None
        out.params[name] = ParamError(name, n, rel_l2(math.sqrt(sq_diff), math.sqrt(sq_ref)),
                                      upd, upd_lr, math.sqrt(sq_ref / max(n, 1)), lost,
                                      sq_diff, sq_ref, du * du, nu * nu, dot, sq_run)
    return out


_FLOAT32_MAX = torch.finfo(torch.float32).max


def _f32(v: float) -> float:
    """A float64 sum as a float32 dot ends: beyond float32's range it is +-inf."""
    return math.copysign(math.inf, v) if abs(v) > _FLOAT32_MAX else v


def _sums_of(pairs: list, zeros: bool, known: dict) -> dict:
    """:func:`_sq_sums` of every ``(key, run tensor, reference tensor)``, by key; the
    reference's squared norm is taken from ``known`` and put there. A tensor of more than
    :data:`_GROUPED` elements is summed alone (``torch.dot``, chunk by chunk); the smaller
    ones in groups (:data:`_GROUP` elements in all at most), a few ops per group instead of a
    dozen per tensor (on a model of hundreds of small parameters, the comparisons were ~0.2
    plain steps a run)."""
    out: dict = {}
    group: list = []
    size = 0
    for key, x, r in pairs:
        n = r.numel()
        if n == 0 or n > _GROUPED:
            out[key] = _sq_sums(x, r, zeros, known.get(key))
            known[key] = out[key][1]
            continue
        if size + n > _GROUP:
            _group_sums(group, zeros, known, out)
            group, size = [], 0
        group.append((key, x, r))
        size += n
    if group:
        _group_sums(group, zeros, known, out)
    return out


#: Tensors of at most ``_GROUPED`` elements are compared in groups of at most ``_GROUP``
#: elements (:func:`devlint.runtime.group_sums.group_sums`): below it a tensor's dozen
#: Python-dispatched ops cost more than the group's float64 passes over its elements, and a
#: group's temporaries stay small enough to be reused from the heap (not fresh pages).
_GROUPED, _GROUP = 1024, 8192


def _group_sums(group: list, zeros: bool, known: dict, out: dict) -> None:
    """:func:`_sums_of` for one group (:func:`devlint.runtime.group_sums.group_sums`)."""
    xs = [x for _, x, _ in group]
    if len(xs) > 1 and all(type(x) is Delta for x in xs) and len({x.round_to for x in xs}) == 1:
        runs = [_deltas(xs)]
    else:
        runs = [x.chunk(0, x.numel()) if isinstance(x, Delta) else x.reshape(-1) for x in xs]
    sums = group_sums(runs, [r.reshape(-1) for _, _, r in group], zeros,
                      any(known.get(k) is None for k, _, _ in group))
    for (key, _, _), (sq_diff, sq_ref, lost, dot, sq_run) in zip(group, sums):
        if known.get(key) is None:
            known[key] = sq_ref
        out[key] = (sq_diff, known[key], lost, dot, sq_run)


def _deltas(deltas: list) -> torch.Tensor:
    """The updates of several :class:`Delta` (one ``round_to`` for all) as one flat float32
    CPU tensor, in order: what their :meth:`Delta.chunk` give, concatenated, each element
    computed by the same float32 operations (a few ops for the group instead of ~8 per
    parameter: an SGD model's small parameters cost ~0.1 plain steps a run that way)."""
    after = cat_float32([_flat(d.after) for d in deltas])
    before = cat_float32([_flat(d.before) for d in deltas])
    if deltas[0].round_to:
        before = round_trip(before, deltas[0].round_to)
    return after - before


def needs_floor(errors: Errors, mode: str, tol: Tolerances) -> bool:
    """True when some judged error exceeds ``tol.quick`` unit roundoffs, so the run can only be
    judged against a measured noise floor (float32 never needs one). Updates count as
    :func:`judge`'s quick bound counts them (those measured: optimizers linear in the
    gradient): an update far below its parameter's float32 spacing (``lr * g`` of 1e-8 on a
    weight of 0.3) is measured as a difference of two float32 values, with a relative error
    no precision of the step explains, which only a floor calibrates."""
    if mode == "float32":
        return False
    limit = tol.quick * unit_roundoff(mode)
    judged = errors.judged(tol).values()
    return (bool(errors.missing) or errors.loss > limit
            or any(not (p.grad <= limit) for p in judged)
            or any(not math.isnan(p.update) and p.update > limit for p in judged))


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
    notes: list[str] = field(default_factory=list)  # for the report (conditioning.confirm)


def judge(errors: Errors, mode: str, tol: Tolerances, floor: Errors | None = None,
          adaptive: bool = False, fixed_rtol: float | None = None,
          wide_floor: Errors | None = None, wide_scale: float | None = None) -> Verdict:
    """Judge a run's :class:`Errors` (see :class:`Tolerances` for the rule).

    Three ways, by the arguments:

    - ``floor`` given (calibrated): the whole-model gradient error ``E`` (all judged
      parameters concatenated, i.e. relative to the model's gradient norm) must be within
      ``tol.k * F``, ``F`` the floor run's ``E``; likewise the whole-model update error for
      optimizers linear in the gradient; the loss within ``tol.k * max(floor loss, u)``.
      Per-parameter errors are not judged one by one here: the gradient of a parameter that
      is a sum with cancellation (a classifier bias over a small batch) has a large relative
      error in any precision, and is small against the model's gradient norm.
      With ``wide_floor`` too (the floor run with the rounding error scaled by ``tol.k``,
      :class:`Rounding`), each limit is the larger of ``tol.k`` times the floor and the wide
      floor's own error: ``k * F`` extrapolates linearly, which a gradient with kinks (a
      ReLU after BatchNorm, max-pooling, top-k routing) is not: an element crossing a kink
      changes the gradient by a fixed amount whatever the precision, and one rounding sample
      may cross none while the autocast run crosses one.
    - ``fixed_rtol`` given (float32 across devices): ``E`` and the loss error within it.
    - neither (the quick bound): every judged parameter's own relative error and the loss
      error within ``tol.quick * u``. When this fails the caller measures a floor; failing
      the quick bound alone is never a mismatch in :func:`devlint.runtime.check_step`.

    Args:
        errors: the run's errors from :func:`measure`.
        mode: ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        tol: the mode's :class:`Tolerances`.
        floor: the noise-floor run's errors.
        wide_floor: the errors of the floor run with ``Rounding(mode, wide_scale)``, or None.
        wide_scale: the scale of that perturbation (for the report); default ``tol.k``.
        adaptive: the optimizer is adaptive (Adam-like): updates are reported, not judged.
        fixed_rtol: judge the whole-model error against this bound.

    Returns:
        a :class:`Verdict` whose ``worst`` lists the parameters contributing most to the
        error (name, own relative error, limit); never raises.
    """
    judged = errors.judged(tol)
    excluded = len(errors.params) - len(judged)
    model_err = errors.model_error(tol)
    upd_err = errors.model_error(tol, update=True) if not adaptive else None
    floor_err = None
    if fixed_rtol is not None:
        limit = loss_limit = fixed_rtol
        ok_grad = model_err <= limit
        ok_upd = adaptive or math.isnan(upd_err) or upd_err <= limit
        how = f"whole-model relative error {'within' if ok_grad else 'beyond'} {fixed_rtol:g}"
    elif floor is None:
        limit = loss_limit = tol.quick * unit_roundoff(mode)
        ok_grad = all(p.grad <= limit for p in judged.values())
        ok_upd = adaptive or all(math.isnan(p.update) or p.update <= limit for p in judged.values())
        how = f"within {tol.quick:g} unit roundoffs of {mode} ({limit:.1e}), so no noise-floor run was needed"
    else:
        floor_err = floor.model_error(tol)
        limit = k_floor = tol.k * floor_err
        loss_limit = tol.k * max(floor.loss, unit_roundoff(mode))
        wide = wide_floor.model_error(tol) if wide_floor is not None else 0.0
        if wide_floor is not None:
            limit = max(limit, wide)
            loss_limit = max(loss_limit, wide_floor.loss)
        ok_grad = model_err <= limit
        ok_upd = True
        if not adaptive:
            upd_limit = tol.k * floor.model_error(tol, update=True)
            if wide_floor is not None:
                upd_limit = max(upd_limit, wide_floor.model_error(tol, update=True))
            ok_upd = math.isnan(upd_err) or upd_err <= upd_limit
        how = (f"whole-model error {'within' if ok_grad else 'beyond'} {tol.k:g}x the noise floor "
               f"of {mode} rounding on this model (floor {floor_err:.1e}, limit {k_floor:.1e})")
        if wide_floor is not None:
            how += (f"; {'or within' if ok_grad else 'and beyond'} the error of {wide_scale or tol.k:g}x "
                    f"that rounding's perturbation ({wide:.1e})")
    share = sorted(judged.values(), key=lambda p: -p.sq_diff)
    worst = []
    if not (ok_grad and ok_upd):
        worst = [(p.name, p.grad, limit) for p in share if p.sq_diff > 0][:20]
    if adaptive:
        ups = [p.update_lr for p in judged.values() if p.update_lr is not None and not math.isnan(p.update_lr)]
        update_err = max(ups, default=None)
        how += ("; judged on gradients (adaptive optimizer: first update ~ lr*sign(g)"
                + ("; update err in lr units)" if ups else ", updates not compared)"))
    else:
        update_err = upd_err if upd_err is not None and not math.isnan(upd_err) else None
    loss_ok = errors.loss <= loss_limit
    ok = ok_grad and ok_upd and loss_ok and not errors.missing
    return Verdict(ok, model_err, floor_err, worst, update_err, not adaptive, excluded, errors.loss,
                   loss_ok, how, list(errors.missing))

