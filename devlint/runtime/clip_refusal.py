"""``clip_grad_norm_(..., error_if_nonfinite=True)`` in a mixed-precision step.

GradScaler expects some float16 steps to overflow: when the unscaled gradients hold inf/NaN,
``scaler.step`` skips the optimizer step and ``scaler.update`` lowers the scale (PyTorch AMP
examples, "Gradient clipping": unscale, clip, ``scaler.step``). Its scale starts at 2^16, so the
first steps of a float16 run commonly overflow on a GPU. ``clip_grad_norm_`` with
``error_if_nonfinite=True`` raises on exactly those gradients ("The total norm of order 2.0 for
gradients from `parameters` is non-finite, so it cannot be clipped",
torch/nn/utils/clip_grad.py, torch 2.13), so training stops at a step the scaler would have
skipped. :func:`clip_refusal` words that error and its fix.
"""

from __future__ import annotations

__all__ = ["clip_refusal"]


def clip_refusal(error: str, scale: float | None) -> tuple[str, str]:
    """(what went wrong, the fix) for ``error``, the exception's first line; ``scale``: the
    GradScaler's scale when it was raised (None outside a scaled float16 run)."""
    kind = error.split(":", 1)[0]
    if scale is None:
        return (f"{kind} in clip_grad_norm_(..., error_if_nonfinite=True): the gradients hold inf/NaN",
                "find the op that makes the gradients inf/NaN (the float32 run's are finite?)")
    return (f"{kind} in clip_grad_norm_(..., error_if_nonfinite=True): the gradients of a float16 step at "
            f"loss scale {scale:g} hold inf/NaN, a step GradScaler skips by itself (scaler.step, then a "
            "lower scale in scaler.update); on a GPU training stops there",
            "drop error_if_nonfinite=True under a GradScaler: scaler.step skips steps with inf/NaN gradients")
