"""The add whose low-precision accumulation rounds its increments away.

A state advanced by many small steps in the activations' dtype (a fixed-step ODE solver's
``z = z + dt * f(z)``, a hand-written running sum over time) loses every increment smaller than
half the state's spacing: float16 keeps 11 significant bits, so with ``|z| ~ 1`` an increment
below ~5e-4 leaves ``z`` unchanged. Autocast keeps ``add``'s inputs' dtype (on a GPU too), so
the float16 run drifts from float32 although no op overflows or underflows, no module's output
alone drifts, and the mismatch lands on whatever parameter comes after.

:func:`swamp_probe` replays ``loss_fn`` under autocast in the run's dtype (the same rules,
kernels and step-made regions as the runs) and, for each out-of-place ``add``/``sub`` whose
output is float16 or bfloat16, takes the smaller operand of each element as the increment and
measures what rounding the sum took from it: ``|(out - larger) - smaller|`` against
``|smaller|``, summed over elements and calls. Calls are grouped by op and module; the group that
lost the largest share is named when it ran at least :data:`MIN_CALLS` times (an accumulation,
not one residual add per block) and lost at least :data:`LOST_SHARE` of its increments' total
size (a residual add of comparable operands loses ~1e-4). It runs only to explain a mismatching
run that the other replays left unexplained.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .loss_replay import replay_loss
from .standin import module_label
from .step import TrainingStep

__all__ = ["Swamped", "swamp_probe", "MIN_CALLS", "LOST_SHARE"]

#: The calls of one op in one module that make an accumulation (a residual add runs once a block).
MIN_CALLS = 8
#: The share of an accumulation's increments (their summed magnitude) rounding must take.
LOST_SHARE = 0.1
_LOW = (torch.float16, torch.bfloat16)
_aten = torch.ops.aten
_ADDS = {_aten.add.Tensor, _aten.sub.Tensor}


@dataclass
class Swamped:
    """An accumulation whose increments the low precision rounds away. ``op``: the aten op;
    ``module``: the module that ran it; ``dtype``: its output dtype; ``calls``: how many times it
    ran; ``share``: the part of its increments' summed magnitude lost to rounding (0 to ~1)."""

    op: str
    module: str
    dtype: str
    calls: int
    share: float


class _Probe(TorchDispatchMode):
    def __init__(self, tracker, model):
        super().__init__()
        self.tracker, self.model = tracker, model
        self.sites: dict[tuple[str, str], list[int]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in _ADDS and not kwargs:
            try:
                self._check(func, args, out)
            except Exception:  # noqa: BLE001 - the probe must never break the user's step
                pass
        return out

    def _check(self, func, args, out) -> None:
        if not isinstance(out, torch.Tensor) or out.dtype not in _LOW or not out.numel() or len(args) != 2:
            return
        a, b = args
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dtype != out.dtype \
                or b.dtype != out.dtype:
            return
        a, b = torch.broadcast_tensors(a.float(), b.float() if func is _aten.add.Tensor else -b.float())
        if a.shape != out.shape:
            return
        big_is_a = a.abs() >= b.abs()
        big, small = torch.where(big_is_a, a, b), torch.where(big_is_a, b, a)
        applied = out.float() - big  # what the add really added to the larger operand
        site = self.sites.setdefault((str(func), module_label(self.model, self.tracker.parents)), [0, 0.0, 0.0])
        site[0] += 1
        site[1] += float((applied - small).abs().sum())
        site[2] += float(small.abs().sum())


def swamp_probe(step: TrainingStep, device: str, dtype: torch.dtype, seed: int,
                kernels: str = "emulated") -> Swamped | None:
    """Replay ``step.loss_fn`` on a fresh copy of the model on ``device`` under autocast
    ``dtype`` (float16 or bfloat16) and return the accumulation whose rounding takes the largest share of
    its increments (see the module docstring), or None. Exceptions from the step propagate."""
    probe = replay_loss(step, device, dtype, seed, kernels, _Probe)
    found = [(lost / size, op, module, calls) for (op, module), (calls, lost, size) in probe.sites.items()
             if calls >= MIN_CALLS and size > 0 and lost >= LOST_SHARE * size]
    if not found:
        return None
    share, op, module, calls = max(found)
    return Swamped(op, module, str(dtype).removeprefix("torch."), calls, share)
