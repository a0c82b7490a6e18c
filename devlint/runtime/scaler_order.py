"""GradScaler's "already stepped" errors, named as what the step did wrong.

``torch.amp.GradScaler`` keeps a stage per optimizer from one ``update()`` to the next
(``OptState`` in ``torch/amp/grad_scaler.py``: ready, unscaled, stepped) and only ``update()``
resets it. A step that steps one optimizer several times (PPO's epochs of minibatches, a GAN
that updates the same optimizer twice) and calls ``update()`` once at the end raises at the
second ``unscale_`` ("unscale_() is being called after step()") or the second ``step`` ("step()
has already been called since the last update()"). Only the float16 run raises, as on a GPU: a
disabled scaler (float32, bfloat16) returns before it checks its stage. The raw message names
neither the call that is missing nor where it goes.
"""

from __future__ import annotations

from .names import first_line

__all__ = ["order_error"]

#: GradScaler's message -> (the method that raised, the call the step repeated)
_STEPPED = {
    "unscale_() is being called after step()": ("GradScaler.unscale_", "scaler.unscale_(optimizer)"),
    "step() has already been called since the last update()": ("GradScaler.step", "scaler.step(optimizer)"),
}


def order_error(exc: BaseException) -> tuple[str, str, str] | None:
    """``(op, error, fix)`` when ``exc`` is GradScaler refusing a second ``unscale_``/``step``
    of an optimizer already stepped since the last ``update()``; None for any other error."""
    text = str(exc)
    for message, (op, call) in _STEPPED.items():
        if message in text:
            return (op, f"the step calls {call} after scaler.step(optimizer) with no scaler.update() between "
                        f"(several optimizer steps in one step?), and GradScaler raises \"{first_line(exc)}\"",
                    "call scaler.update() after every scaler.step(optimizer)")
    return None
