"""One replay of ``step.loss_fn`` under autocast, with a diagnostic dispatch mode watching it.

The diagnostic replays that look for a cause in the forward (:mod:`.underflow_probe`,
:mod:`.swamp_probe`) run the step the same way: a fresh copy of the
model and batch on ``device``, the module tracker that names where an op ran, the seed of the
runs, CUDA's autocast regions and kernels on the CPU where the CPU stands in for CUDA
(:func:`devlint.runtime.own_autocast.cuda_on_cpu`, :func:`devlint.runtime.emulate.cpu_kernels`),
then ``loss_fn`` under ``torch.autocast(device, dtype)``.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Callable, TypeVar

import torch

from . import autocast_policy, emulate
from .own_autocast import cuda_on_cpu
from .standin import Tracker
from .step import TrainingStep, map_tensors, seed_host

__all__ = ["replay_loss"]

W = TypeVar("W")


def replay_loss(step: TrainingStep, device: str, dtype: torch.dtype, seed: int, kernels: str,
                watcher: Callable[[Tracker, torch.nn.Module], W]) -> W:
    """Run ``step.loss_fn`` once on a fresh copy of the model (``device``, autocast ``dtype``:
    float16 or bfloat16) with ``watcher(tracker, model)`` (a dispatch mode that records what it
    sees) active inside the module tracker, and return that watcher. ``kernels`` as in
    :func:`devlint.runtime.emulate.cpu_kernels`. Exceptions from the step propagate."""
    model = copy.deepcopy(step.model).to(device)
    batch = map_tensors(lambda t: t.to(device), step.batch)
    tracker = Tracker()
    watch = watcher(tracker, model)
    torch.manual_seed(seed)
    seed_host(seed)
    own = cuda_on_cpu() if device == "cpu" and autocast_policy.current() == "cuda" else contextlib.nullcontext()
    with emulate.cpu_kernels(device, dtype, kernels, model), tracker, watch, own:
        with torch.autocast(device_type=device, dtype=dtype):
            step.loss_fn(model, batch)
    return watch
