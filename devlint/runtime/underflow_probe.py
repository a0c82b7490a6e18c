"""The first op whose low-precision output flushes to zero values float32 keeps.

A loss computed by hand in float16 (``(d * d).mean()`` of errors around 1e-4, whose squares
are below float16's smallest subnormal, 2**-24 ~ 6e-8) reads 0 in the float16 run while the
float32 run's is 1e-8: the loss mismatches and no op went non-finite, so the first-non-finite
replay (:func:`devlint.runtime.probes.nonfinite_probe`) finds nothing, and the drift replay
(:func:`devlint.runtime.probes.unstable_modules`) blames a module downstream of nothing.

:func:`underflow_probe` replays the loss under autocast in the run's dtype (the same rules,
kernels and step-made regions as the runs) and recomputes each op whose output is float16 or
bfloat16 from its inputs cast to float32 (a cast of a float32 tensor to that dtype, as autocast
casts an op's operands, is compared with its input): the first op where at least
:data:`FLUSHED_SHARE` of the elements that are non-zero in float32, and smaller than the
dtype's smallest normal number (``torch.finfo(dtype).tiny``), are zero in its own output is
named. In-place ops, random ops and ``empty``-family ops are not recomputed. It runs only to
explain a mismatching run whose loss differs from float32's, and a non-finite one whose first
inf/NaN op had a zero among its finite inputs (``log(0)``, ``x / 0``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from .loss_replay import replay_loss
from .probes import EMPTY_FAMILY, _tensors
from .standin import module_label
from .step import TrainingStep

__all__ = ["Flushed", "underflow_probe", "FLUSHED_SHARE"]

#: The share of an op's small non-zero float32 elements that must be zero in its own output.
FLUSHED_SHARE = 0.5
_LOW = (torch.float16, torch.bfloat16)
#: Casts whose float32 input is itself what float32 keeps (autocast casts by ``_to_copy``).
_CASTS = (torch.ops.aten._to_copy.default,)


@dataclass
class Flushed:
    """An op whose low-precision output is zero where float32's is not. ``op``: the aten op;
    ``module``: the module that ran it (``"loss_fn (outside the model)"`` outside the model);
    ``dtype``: its output dtype; ``flushed``/``nonzero``: elements zero in its output but
    non-zero in float32, of the non-zero float32 elements; ``largest``: the largest magnitude
    among the flushed float32 values."""

    op: str
    module: str
    dtype: str
    flushed: int
    nonzero: int
    largest: float


class _Probe(TorchDispatchMode):
    def __init__(self, tracker, model):
        super().__init__()
        self.tracker, self.model = tracker, model
        self.first: Flushed | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.first is None and func not in EMPTY_FAMILY and not func._schema.is_mutable \
                and torch.Tag.nondeterministic_seeded not in func.tags:
            try:
                self._check(func, args, kwargs, out)
            except Exception:  # noqa: BLE001 - the probe must never break the user's step
                pass
        return out

    def _check(self, func, args, kwargs, out) -> None:
        if not isinstance(out, torch.Tensor) or out.dtype not in _LOW or not out.numel():
            return
        if func in _CASTS and isinstance(args[0], torch.Tensor) and args[0].dtype == torch.float32:
            ref = args[0]  # a cast to the low dtype (autocast's own): float32 keeps its input
        elif not any(t.dtype in _LOW for t in _tensors((args, kwargs))):
            return
        else:
            wide = tree_map(lambda t: t.float() if isinstance(t, torch.Tensor) and t.dtype in _LOW else t,
                            (args, kwargs))
            ref = func(*wide[0], **wide[1])
        if not isinstance(ref, torch.Tensor) or ref.shape != out.shape:
            return
        tiny = torch.finfo(out.dtype).tiny
        small = (ref != 0) & (ref.abs() < tiny)
        flushed = small & (out == 0)
        n_flushed, n_nonzero = int(flushed.sum()), int((ref != 0).sum())
        if n_flushed and n_flushed >= FLUSHED_SHARE * n_nonzero:
            self.first = Flushed(str(func), module_label(self.model, self.tracker.parents),
                                 str(out.dtype).removeprefix("torch."), n_flushed, n_nonzero,
                                 float(ref[flushed].abs().max()))


def underflow_probe(step: TrainingStep, device: str, dtype: torch.dtype, seed: int,
                    kernels: str = "emulated") -> Flushed | None:
    """Replay ``step.loss_fn`` on a fresh copy of the model on ``device`` under autocast
    ``dtype`` (float16 or bfloat16) and return the first op that flushes to zero values
    float32 keeps (see the module docstring), or None. Exceptions from the step propagate."""
    probe = replay_loss(step, device, dtype, seed, kernels, _Probe)
    return probe.first
