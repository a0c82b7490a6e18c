"""One run's gradient errors gathered per module, for the HTML and Markdown reports.

:func:`module_rows` turns the per-parameter statistics of a run (:class:`~.compare.Errors`)
and of its noise-floor run into one row per module that owns parameters: the module's own
gradient error ``||g_m - g_ref_m|| / ||g_ref_m||`` over its judged parameters (unitless), the
same error of the floor run, the module's limit by the rule of :func:`~.compare.judge` applied
to the module alone (``k`` times its floor when a floor was measured, else ``quick`` unit
roundoffs of the dtype), and for float16 the share of its gradient elements that underflow.
The rows are for reading: the run's verdict is the whole-model judgement of
:func:`~.compare.judge`, which a module above its own limit does not change by itself.
"""

from __future__ import annotations

import math

import torch

from .compare import Errors, Tolerances, unit_roundoff
from .names import module_of

__all__ = ["module_rows", "tiny_counts", "FLOAT16_SUBNORMAL"]

#: float16's smallest subnormal, 2**-24: a gradient element smaller in magnitude is zero in
#: float16 (IEEE 754 binary16).
FLOAT16_SUBNORMAL = 2.0 ** -24


def _rel(diff: float, ref: float) -> float:
    if not math.isfinite(diff):
        return math.inf
    return math.sqrt(diff / ref) if ref > 0 else (0.0 if diff == 0 else math.inf)


def tiny_counts(ref_grads: dict, cache: dict | None = None) -> dict[str, int]:
    """Per parameter with a gradient, how many of its reference gradient's elements are
    non-zero and below :data:`FLOAT16_SUBNORMAL` in magnitude (what float16 cannot hold
    unscaled). ``cache``: the reference's dict of per-check numbers (``Raw.norms``), where
    the counts are kept after the first call."""
    found = cache.get("tiny") if cache is not None else None
    if found is None:
        found = {n: int(torch.count_nonzero((g != 0) & (g.abs() < FLOAT16_SUBNORMAL)))
                 for n, g in ref_grads.items() if g is not None}
        if cache is not None:
            cache["tiny"] = found
    return found


def module_rows(model: torch.nn.Module, errors: Errors, floor: Errors | None, tol: Tolerances,
                mode: str, ref_grads: dict | None = None, cache: dict | None = None) -> list[dict]:
    """The per-module view of one run, in the model's parameter order.

    Args:
        model: the user's model (only its module names and classes are read).
        errors: the run's :class:`~.compare.Errors` against the reference.
        floor: the noise-floor run's errors, or None when the run passed without one.
        tol: the mode's :class:`~.compare.Tolerances` (``k``, ``quick``, ``negligible``).
        mode: ``"bfloat16"``, ``"float16"`` or ``"float32"``.
        ref_grads: the reference gradients (CPU tensors by parameter name), for the float16
            share of elements below :data:`FLOAT16_SUBNORMAL`; None to leave it out.
        cache: the reference's dict of per-check numbers (``Raw.norms``): the module of each
            parameter and the counts of :func:`tiny_counts` are kept there; None: none kept.

    Returns:
        one dict per module: ``module``, ``params`` (element count), ``grad_err``,
        ``floor`` (None without a floor run), ``limit``, ``judged`` (False when all its
        parameters have a negligible reference gradient), and for float16 ``underflow``
        (share 0..1 of its elements zero in the run but not in float32) and ``tiny`` (share
        of its reference elements below 2**-24, which float16 cannot hold unscaled).
    """
    judged = errors.judged(tol)
    rows: dict[str, dict] = {}
    modules = cache.setdefault("modules", {}) if cache is not None else {}
    tiny = tiny_counts(ref_grads, cache) if ref_grads is not None and mode == "float16" else {}
    for name, p in errors.params.items():
        module = modules.get(name)
        if module is None:
            module = modules[name] = module_of(model, name)
        row = rows.setdefault(module, {"n": 0, "d": 0.0, "r": 0.0, "fd": 0.0, "fr": 0.0,
                                       "zeros": 0, "tiny": 0, "judged": False})
        row["n"] += p.n
        row["zeros"] += p.zeros
        row["tiny"] += tiny.get(name, 0)
        if name not in judged:
            continue
        row["judged"] = True
        row["d"] += p.sq_diff
        row["r"] += p.sq_ref
        fp = floor.params.get(name) if floor is not None else None
        if fp is not None:
            row["fd"] += fp.sq_diff
            row["fr"] += fp.sq_ref
    out = []
    for module, row in rows.items():
        floor_err = _rel(row["fd"], row["fr"]) if floor is not None and row["judged"] else None
        limit = tol.k * floor_err if floor_err is not None else tol.quick * unit_roundoff(mode)
        item = {"module": module, "params": row["n"], "grad_err": _rel(row["d"], row["r"]) if row["judged"] else None,
                "floor": floor_err, "limit": limit, "judged": row["judged"]}
        if mode == "float16":
            item["underflow"] = row["zeros"] / row["n"] if row["n"] else 0.0
            if ref_grads is not None:
                item["tiny"] = row["tiny"] / row["n"] if row["n"] else 0.0
        out.append(item)
    return out
