"""The one-process runs the distributed check compares DDP with: the full-batch step, and the
*shard emulation* (per rank, the step on that rank's shard in this process, the per-rank
gradients averaged as DDP's all-reduce averages them, then one optimizer step on that
average). Each run is on a deep copy of the model; results are float32 CPU copies keyed by
parameter name."""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from .ddp_rank import params_of, step_once
from .own_autocast import OwnAutocast
from .step import Parameters, TrainingStep, map_tensors

__all__ = ["One", "one_process", "averaged"]


_BN_TYPES = (nn.modules.batchnorm._BatchNorm,)


@dataclass
class One:
    """One process's step: its loss (None for a step on given gradients), gradients, and the
    parameters before and after the step (``after`` None when a ``step_fn`` cannot be replayed
    on given gradients)."""

    loss: float | None
    grads: dict
    before: dict
    after: dict
    bn: list = field(default_factory=list)  # (module name, type, per-sample channel means [N, C])


def _bn_hooks(model: nn.Module, sink: list):
    handles = []
    for name, mod in model.named_modules():
        if isinstance(mod, _BN_TYPES) and not isinstance(mod, nn.SyncBatchNorm):
            def hook(m, args, name=name):
                x = args[0]
                if (m.training or m.running_mean is None) and x.dim() >= 2:
                    per_sample = x.detach().float().flatten(2).mean(-1) if x.dim() > 2 else x.detach().float()
                    sink.append((name, type(m).__name__, per_sample.cpu()))
            handles.append(mod.register_forward_pre_hook(hook))
    return handles


def one_process(step: TrainingStep, batch, seed: int, device: str, grads: dict | None = None,
                 bn: bool = False, shard: bool = False, rules: OwnAutocast | None = None) -> One:
    """The step in this process on a deep copy of the model: its own gradients, or (``grads``
    given) the optimizer step on those gradients (``after`` is None for a ``step_fn``). A
    ``shard`` run does not clip gradients (DDP clips the average). ``rules``: what autocast
    regions the step opens follow (as on the ranks), and where their dtypes are recorded."""
    model = copy.deepcopy(step.model).to(device)
    before = params_of(model)
    sink: list = []
    if grads is not None:
        if step.step_fn is not None:  # devlint cannot replay a custom step on given gradients
            return One(None, grads, before, None)
        optimizer = step.optimizer(Parameters(model))
        scheduler = step.scheduler(optimizer) if step.scheduler else None
        for n, p in model.named_parameters():
            g = grads.get(n)
            p.grad = None if g is None else g.to(device, p.dtype, copy=True)  # clipping is in place
        if step.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), step.clip_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        return One(None, grads, before, params_of(model))
    handles = _bn_hooks(model, sink) if bn else []
    try:
        with rules if rules is not None else contextlib.nullcontext():
            loss, grads = step_once(step, model, model, map_tensors(lambda t: t.to(device), batch), seed,
                                    clip=not shard)
    finally:
        for h in handles:
            h.remove()
    return One(loss, grads, before, params_of(model), sink)


def averaged(per_shard: list, names, ws: int) -> dict:
    """What DDP's all-reduce computes from the ranks' gradients: their average, a rank without
    a gradient for a parameter contributing zeros (None where no rank has one)."""
    out = {}
    for name in names:
        gs = [s.grads.get(name) for s in per_shard]
        if all(g is None for g in gs):
            out[name] = None
            continue
        ref = next(g for g in gs if g is not None)
        out[name] = sum((torch.zeros_like(ref) if g is None else g) for g in gs) / ws
    return out
