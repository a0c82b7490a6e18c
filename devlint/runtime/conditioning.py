"""Whether a gradient mismatch is the low-precision run's fault, or the gradient's own.

A gradient that is discontinuous at the very point the float32 reference evaluates it (bilinear
sampling exactly on pixel centres, as a spatial transformer's identity-initialised grid does:
its gradient with respect to the grid takes the left or the right difference depending on
which side of the centre a coordinate falls) changes by a fixed amount under *any*
perturbation, however small. A low-precision run moves such a point by its rounding and flips
those gradients; so does any other correct run of the same model (another GPU, another
kernel). The noise floor (:mod:`devlint.runtime.compare`) rounds only parameters and inputs,
which need not move the point (an identity affine is exact in every dtype), so the mismatch
looked like the step's fault.

:func:`confirm` runs only after a run failed its floors. It replays the step in float32 with
every floating-point op output of the forward multiplied by ``1 +- NOISE`` (random signs, a
private generator: the step's own random numbers are those of the reference), ``NOISE`` far
below the dtype's rounding (2**-20 against 2**-11 for float16 and 2**-9 for bfloat16) and
far above float32's own (2**-24). A parameter whose reference gradient moves under that
perturbation by at least ``1 / FACTOR`` of the failing run's own error is ill-conditioned at
this point: its error is not judged (a note names it), and the run is judged again without it.
An error that comes from precision (cancellation, overflow, a module that must run in float32)
scales with the perturbation and moves 512-2048 times less under ``NOISE`` than under the
dtype's rounding, far below ``1 / FACTOR`` of the run's error, so it stays a mismatch.
"""

from __future__ import annotations

import dataclasses

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .compare import Errors, Verdict

__all__ = ["NOISE", "FACTOR", "Jitter", "confirm", "ill_conditioned", "without"]

#: The relative size of the perturbation of every forward op output (unitless): 2**-20, 16
#: float32 unit roundoffs, 512x below float16's and 2048x below bfloat16's.
NOISE = 2.0 ** -20
#: A parameter is ill-conditioned when its float32 gradient error under :data:`NOISE` is at
#: least ``1 / FACTOR`` of the failing run's (unitless; devlint's choice: a linear response,
#: the precision bugs', is 512x smaller at this size, 128x below the bar).
FACTOR = 4.0


class Jitter(TorchDispatchMode):
    """While active, each op run with autograd recording (``torch.is_grad_enabled()``: the
    forward, not the backward or the optimizer step) has its fresh floating-point outputs
    multiplied in place by ``1 + scale * s``, ``s`` a random sign per element drawn from a
    generator seeded with ``seed`` (one per device), so the step's own generator is untouched.
    Outputs that alias an input (views, in-place and ``out=`` ops, or sharing an input's
    storage) are left alone: parameters and inputs are never modified."""

    def __init__(self, scale: float = NOISE, seed: int = 0):
        super().__init__()
        self.scale, self.seed, self._gens = scale, seed, {}

    def _gen(self, device: torch.device) -> torch.Generator:
        g = self._gens.get(device)
        if g is None:
            g = self._gens[device] = torch.Generator(device=device)
            g.manual_seed(self.seed)
        return g

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not torch.is_grad_enabled() or any(r.alias_info is not None for r in func._schema.returns):
            return out
        inputs = {a.untyped_storage().data_ptr() for a in _tensors((args, kwargs)) if a.numel()}
        for t in _tensors(out):
            if t.is_floating_point() and t.numel() and t.untyped_storage().data_ptr() not in inputs:
                sign = torch.empty(t.shape, dtype=t.dtype, device=t.device).bernoulli_(0.5, generator=self._gen(t.device))
                t.mul_(sign.mul_(2 * self.scale).add_(1 - self.scale))
        return out


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)


def _jittered(step, seed: int):
    """``step`` whose forward (``loss_fn``, or the whole ``step_fn``) runs under :class:`Jitter`."""
    if step.step_fn is not None:
        inner = step.step_fn

        def step_fn(*a):
            with Jitter(seed=seed):
                return inner(*a)
        return dataclasses.replace(step, step_fn=step_fn)
    loss_fn = step.loss_fn

    def jittered(model, batch):
        with Jitter(seed=seed):
            return loss_fn(model, batch)
    return dataclasses.replace(step, loss_fn=jittered)


def ill_conditioned(run: Errors, jittered: Errors) -> dict[str, tuple[float, float]]:
    """``name -> (run's gradient error, jittered float32 run's)`` for each parameter whose
    error in ``jittered`` is at least ``1 / FACTOR`` of its error in ``run`` (relative L2
    errors against the reference, unitless)."""
    drop = {}
    for name, p in run.params.items():
        q = jittered.params.get(name)
        if q is not None and p.grad > 0 and FACTOR * q.grad >= p.grad:
            drop[name] = (p.grad, q.grad)
    return drop


def without(errors: Errors | None, names: set) -> Errors | None:
    """``errors`` without the parameters named in ``names`` (None stays None)."""
    if errors is None:
        return None
    return dataclasses.replace(errors, params={n: p for n, p in errors.params.items() if n not in names})


def confirm(step, raw, ref, seed: int, verdict: Verdict, rejudge, run_once, bench=None) -> Verdict:
    """``verdict`` (a failed run's) confirmed against the jittered float32 run, or the run
    judged again without its ill-conditioned parameters (see the module docstring).

    Args:
        step: the :class:`~devlint.runtime.step.TrainingStep`; ``raw``: the failing run (its
            ``errors`` per parameter); ``ref``: the reference it was compared with (its device
            and numbers); ``seed``: the run's seed.
        verdict: the failed :class:`~devlint.runtime.compare.Verdict`.
        rejudge: ``rejudge(drop)`` judges the run (and its floors) again without the
            parameter names in ``drop`` and returns a new Verdict.
        run_once: :func:`devlint.runtime.replay.run_once`, as the caller runs its floors.

    Returns:
        ``verdict`` itself when no failing parameter is ill-conditioned, the jittered run
        failed, or the run fails for another reason too (loss, missing gradients); else the
        new verdict, its ``how`` naming the parameters left out (each with its error and the
        jittered float32 run's).
    """
    if raw.errors is None:
        return verdict
    jit = run_once(_jittered(step, seed), ref.device, "float32", seed, ref=ref, bench=bench)
    if jit.errors is None:
        return verdict
    drop = ill_conditioned(raw.errors, jit.errors)
    if not drop or raw.errors.missing or not verdict.loss_ok:  # the loss is continuous: not excused
        return verdict
    again = rejudge(set(drop))
    if not again.ok:
        return verdict
    named = ", ".join(f"{n} ({e:.1e}; float32 itself {j:.1e})" for n, (e, j) in
                      sorted(drop.items(), key=lambda kv: -kv[1][0])[:6])
    more = f" and {len(drop) - 6} more" if len(drop) > 6 else ""
    again.how += (f"; not judged, ill-conditioned here (float32's own gradient moves as much "
                  f"under {NOISE:.0e} relative perturbations of the activations): {named}{more}")
    again.notes.append(f"{raw.device} {raw.mode}: gradients of {', '.join(sorted(drop))} not judged: "
                       f"discontinuous at the reference's point (float32's own moves as much under "
                       f"{NOISE:.0e} relative perturbations of the forward's activations as {raw.mode}'s)")
    return again
