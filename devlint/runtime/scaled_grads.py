"""Gradients a step asks ``torch.autograd.grad`` for through an enabled ``GradScaler``.

A gradient penalty (WGAN-GP, R1, a Jacobian norm) under float16 takes
``torch.autograd.grad(scaler.scale(out), inputs, create_graph=True)``: the gradients come back
multiplied by the loss scale (65536 at first) and must be divided by ``scaler.get_scale()``
before the penalty uses them (PyTorch's "Automatic Mixed Precision examples", "Gradient
penalty"). A step that forgets fails the float16 comparison only (the scaler is off in the
other runs) and the mismatch alone names the parameters the penalty reaches, not why.
:class:`ScaledGrads` notes whether the step took such gradients; the check says so, first,
when that run mismatches (a step that divides them passes, and is never named).
"""

from __future__ import annotations

import functools

import torch

__all__ = ["ScaledGrads"]


class ScaledGrads:
    """While active (``with``), ``used`` becomes True when ``torch.autograd.grad`` is called on
    an output of ``GradScaler.scale`` of an enabled scaler (any scaler: devlint's or the
    step's own). Patches ``torch.amp.GradScaler.scale`` and ``torch.autograd.grad`` for the
    duration, restored on exit; never changes what they return."""

    def __init__(self):
        self.used = False
        self._scaled: dict[int, torch.Tensor] = {}  # id -> tensor, kept alive while active

    def __enter__(self):
        self._scale, self._grad = torch.amp.GradScaler.scale, torch.autograd.grad
        real_scale, real_grad, scaled = self._scale, self._grad, self._scaled

        @functools.wraps(real_scale)
        def scale(scaler, outputs):
            out = real_scale(scaler, outputs)
            if scaler.is_enabled():
                for t in out if isinstance(out, (list, tuple)) else [out]:
                    if isinstance(t, torch.Tensor):
                        scaled[id(t)] = t
            return out

        @functools.wraps(real_grad)
        def grad(outputs, *args, **kwargs):
            ts = outputs if isinstance(outputs, (list, tuple)) else [outputs]
            if any(isinstance(t, torch.Tensor) and scaled.get(id(t)) is t for t in ts):
                self.used = True
            return real_grad(outputs, *args, **kwargs)

        torch.amp.GradScaler.scale, torch.autograd.grad = scale, grad
        return self

    def __exit__(self, *exc) -> None:
        torch.amp.GradScaler.scale, torch.autograd.grad = self._scale, self._grad
        self._scaled.clear()
