"""The GradScaler's scale settled on one forward graph, by backward passes only.

A float16 step whose scaled gradients overflow at the GradScaler's initial scale 2**16 is
skipped, and training halves the scale and tries again. devlint finds the first scale
2**16 / 2**k that is not skipped by bisection over k. The forward pass does not depend on the
scale (``scaler.scale(loss)`` multiplies the loss after it), so every try can reuse one
forward graph (``backward(retain_graph=True)``) instead of replaying the whole step: the
gradients of a try are bitwise those of a fresh step at that scale (same weights, inputs,
dropout masks and kernels; the scale is a power of two). A try costs one backward pass,
not a model restore, a forward, a backward and an optimizer step (measured on the
EfficientNet-like zoo model: ~2.7 plain steps per try before, see docs/runtime.md "Cost").
"""

from __future__ import annotations

import torch

__all__ = ["finite_at", "on_graph", "least_finite", "hint"]


def finite_at(loss: torch.Tensor, params: list, scale: float) -> bool:
    """Backpropagate ``loss`` times ``scale`` (as ``GradScaler.scale`` does: a float32 tensor
    of shape ``[1]``) into fresh ``.grad`` of ``params``, keeping the graph; True when every
    gradient is finite (what ``GradScaler.unscale_`` checks before a step)."""
    for p in params:
        p.grad = None
    (loss * torch.full((1,), scale, dtype=torch.float32, device=loss.device)).backward(retain_graph=True)
    grads = [p.grad if p.grad.layout == torch.strided else p.grad.coalesce().values()
             for p in params if p.grad is not None]
    if not grads:
        return True
    return bool(torch.stack(torch._foreach_norm([g.float() for g in grads])).isfinite().all())


def least_finite(finite, max_halvings: int, hint: int = 0, first_overflows: bool = False,
                 redo: bool = True) -> int | None:
    """The least ``k`` in ``[0, max_halvings]`` with ``finite(k)`` True, assuming (as the
    GradScaler's own halving does) that a smaller scale never overflows where a larger one did
    not; None when ``finite(max_halvings)`` is False too. ``finite(k)`` is called at most once
    per ``k``; with ``redo`` the last call is always at the ``k`` returned (when it is not
    None), so a caller's gradients are those of the answer.

    ``hint``: a guess (:func:`hint`); with a good one the answer costs two calls, ``hint - 1``
    (overflows) and ``hint`` (finite), instead of a bisection's ~5; a wrong one costs a few
    calls more, never another answer. ``first_overflows``: ``finite(0)`` is known False (the
    caller's own first try)."""
    seen: dict[int, bool] = {0: False} if first_overflows else {}
    last: list[int] = []

    def test(k: int) -> bool:
        if k not in seen:
            seen[k] = bool(finite(k))
            last.append(k)
        return seen[k]

    hint = min(max(int(hint), 0), max_halvings)
    if hint > 0 and not test(hint - 1):
        lo, hi = hint, max_halvings  # the answer is at least hint: try it first
        if test(hint):
            lo, hi = hint, hint - 1
        else:
            lo = hint + 1
        best = hint if seen[hint] else None
    elif hint > 0:  # hint - 1 already finite: the answer is below hint
        lo, hi, best = 0, hint - 2, hint - 1
    else:
        if test(0):
            return 0
        lo, hi, best = 1, max_halvings, None
    while lo <= hi:
        k = (lo + hi) // 2
        if test(k):
            best, hi = k, k - 1
        else:
            lo = k + 1
    if redo and best is not None and last and last[-1] != best:
        finite(best)  # leave the caller's gradients at the answer
    return best


def hint(grad_max: float, init_scale: float) -> int:
    """A guess of the halvings the float16 backward needs: the least ``k`` for which the
    largest float32 reference gradient element ``grad_max`` times the scale
    ``init_scale / 2**k`` stays below float16's largest value (65504). Parameter gradients of
    a float16 GEMM or convolution are float16 before they are accumulated into the float32
    ``.grad``, so they overflow there first; activation gradients can overflow earlier,
    which :func:`least_finite` then finds by its own tries. 0 when ``grad_max`` is not
    finite and positive."""
    if not (0.0 < grad_max < float("inf")):
        return 0
    k = 0
    while grad_max * (init_scale / 2 ** k) >= torch.finfo(torch.float16).max and k < 64:
        k += 1
    return k


def on_graph(loss: torch.Tensor, params: list, init_scale: float, max_halvings: int, guess: int = 0) -> int | None:
    """The least ``k`` in ``[0, max_halvings]`` whose scale ``init_scale / 2**k`` gives finite
    gradients (:func:`least_finite`, starting from ``guess``); None when even the smallest
    overflows. On return the ``.grad`` of ``params`` are those of the scale chosen (scaled,
    not yet unscaled); the graph is kept (free it by dropping ``loss``)."""
    return least_finite(lambda k: finite_at(loss, params, init_scale / 2 ** k), max_halvings, guess)
