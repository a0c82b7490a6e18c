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

__all__ = ["finite_at", "on_graph"]


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


def on_graph(loss: torch.Tensor, params: list, init_scale: float, max_halvings: int) -> int | None:
    """The least ``k`` in ``[0, max_halvings]`` whose scale ``init_scale / 2**k`` gives finite
    gradients, found by bisection (assuming, as devlint's replayed bisection did, that a
    smaller scale never overflows where a larger one did not); None when even the smallest
    overflows. On return the ``.grad`` of ``params`` are those of the scale chosen (scaled,
    not yet unscaled); the graph is kept (free it by dropping ``loss``)."""
    if finite_at(loss, params, init_scale):
        return 0
    lo, hi, best, last = 1, max_halvings, None, None
    while lo <= hi:
        k = (lo + hi) // 2
        last = k
        if finite_at(loss, params, init_scale / 2 ** k):
            best, hi = k, k - 1
        else:
            lo = k + 1
    if best is not None and last != best:
        finite_at(loss, params, init_scale / 2 ** best)
    return best
