"""Tolerances and the comparison of one run with the CPU float32 reference."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["Tolerances", "DEFAULT_TOLERANCES", "Comparison", "compare_tensors", "resolve_tolerances"]


@dataclass(frozen=True)
class Tolerances:
    """How far a run may be from the CPU float32 reference before devlint reports a mismatch.

    The test is the norm-wise form of ``torch.testing.assert_close``: for each parameter's
    gradient ``g`` and update ``u = params_after - params_before`` (float32, on the CPU,
    ``n`` elements), a run passes when ``||g - g_ref||_2 <= atol * sqrt(n) + rtol * ||g_ref||_2``
    (and the same for ``u``). Every tensor that passes ``assert_close(rtol, atol)`` element-wise
    passes this test. The loss passes when ``|loss - loss_ref| <= atol + rtol * |loss_ref|``.

    Attributes:
        rtol: relative tolerance (unitless).
        atol: absolute tolerance, in the units of the compared values (loss, gradient, update).
        cos_min: the smallest cosine similarity allowed between a gradient and its reference,
            checked only where ``||g_ref||_2 > atol * sqrt(n)`` (below that the direction is
            noise). devlint's choice: ``1 - rtol``.
        underflow: float16 only: the largest fraction (0..1) of gradient elements that may be
            zero without loss scaling while non-zero in float32 before devlint reports
            ``underflow``. devlint's choice: 0.1 %.

    Defaults per mode (:data:`DEFAULT_TOLERANCES`) and their sources:

    - ``float32``: rtol 1.3e-6, atol 1e-5: ``torch.testing.assert_close`` defaults for float32.
    - ``bfloat16``: rtol 1.6e-2, atol 1e-5: ``torch.testing.assert_close`` defaults for
      bfloat16 (8 significant bits).
    - ``float16``: rtol 1e-3: ``torch.testing.assert_close`` default for float16; atol 1e-3:
      PyTorch's ``test_grad_scaling_autocast`` (``test/test_cuda.py``), which compares
      "pure fp32 arithmetic vs a mixture of fp16 and fp32" with ``atol=1e-3``.
    """

    rtol: float
    atol: float
    cos_min: float
    underflow: float = 1e-3


DEFAULT_TOLERANCES: dict[str, Tolerances] = {
    "float32": Tolerances(rtol=1.3e-6, atol=1e-5, cos_min=1 - 1.3e-6),
    "bfloat16": Tolerances(rtol=1.6e-2, atol=1e-5, cos_min=1 - 1.6e-2),
    "float16": Tolerances(rtol=1e-3, atol=1e-3, cos_min=1 - 1e-3),
}


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
    if not hasattr(tolerances, "items"):
        raise TypeError("tolerances must be a Tolerances or a dict of mode -> Tolerances")
    for mode, tol in tolerances.items():
        if mode not in merged:
            raise ValueError(f"unknown mode {mode!r} in tolerances; use one of {sorted(merged)}")
        if not isinstance(tol, Tolerances):
            raise TypeError(f"tolerances[{mode!r}] must be a Tolerances")
        merged[mode] = tol
    return merged


@dataclass(frozen=True)
class Comparison:
    """One tensor compared with its reference (both float32, CPU, same shape).

    ``rel_l2`` is ``||x - ref|| / ||ref||`` (``inf`` when ``ref`` is zero and ``x`` is not),
    ``cosine`` the cosine similarity (``None`` where it is not checked), ``ok`` whether the
    :class:`Tolerances` test passed.
    """

    rel_l2: float
    cosine: float | None
    ok: bool


def compare_tensors(x: torch.Tensor, ref: torch.Tensor, tol: Tolerances, with_cosine: bool) -> Comparison:
    """Compare ``x`` with ``ref`` (float32 CPU tensors of one shape) under ``tol``."""
    x = x.double().flatten()
    ref = ref.double().flatten()
    if not bool(torch.isfinite(x).all()):
        return Comparison(math.inf, None, False)
    diff = float(torch.linalg.vector_norm(x - ref))
    ref_norm = float(torch.linalg.vector_norm(ref))
    floor = tol.atol * math.sqrt(max(ref.numel(), 1))
    ok = diff <= floor + tol.rtol * ref_norm
    if ref_norm > 0:
        rel = diff / ref_norm
    else:
        rel = 0.0 if diff == 0 else math.inf
    cosine = None
    if with_cosine and ref_norm > floor:
        x_norm = float(torch.linalg.vector_norm(x))
        cosine = float(x @ ref) / (x_norm * ref_norm) if x_norm > 0 else 0.0
        ok = ok and cosine >= tol.cos_min
    return Comparison(rel, cosine, ok)


def loss_ok(loss: float, ref: float, tol: Tolerances) -> tuple[float, bool]:
    """Relative error of a loss and whether ``|loss - ref| <= atol + rtol * |ref|``."""
    if not math.isfinite(loss):
        return math.inf, False
    err = abs(loss - ref)
    rel = err / abs(ref) if ref != 0 else (0.0 if err == 0 else math.inf)
    return rel, err <= tol.atol + tol.rtol * abs(ref)
