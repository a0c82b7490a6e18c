"""How a batch is split over the ranks of the distributed check: contiguous equal blocks of
samples along dim 0, as ``torch.chunk`` cuts and as a ``DistributedSampler`` without
shuffling hands out; tensors without that batch dimension go whole to every rank."""

from __future__ import annotations

from typing import Any

import torch

from .step import map_tensors

__all__ = ["leaves", "batch_size", "shard_batch", "truncate"]


def leaves(obj, path="batch"):
    """Yield ``(path, tensor)`` for every tensor in a nesting of tuples, lists and dicts."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, (tuple, list)):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{path}[{i}]")
    elif isinstance(obj, dict) or hasattr(obj, "items"):
        for k, v in obj.items():
            yield from leaves(v, f"{path}[{k!r}]")


def batch_size(batch: Any) -> int | None:
    """The batch size: dim 0 of the first tensor with at least one dimension, in the order of
    :func:`devlint.runtime.step.map_tensors` (tuples and lists in order, dicts by key order).

    Returns ``None`` when the batch holds no such tensor.
    """
    for _, t in leaves(batch):
        if t.dim() >= 1:
            return int(t.shape[0])
    return None


def shard_batch(batch: Any, rank: int, world_size: int, size: int | None = None) -> Any:
    """Rank ``rank``'s shard of ``batch``: samples ``[rank * n, (rank + 1) * n)``, ``n = size //
    world_size``, of every tensor whose dim 0 equals the batch size ``size`` (default
    :func:`batch_size`); 0-dim tensors, tensors of another length and non-tensor leaves go
    whole to every rank. Contiguous blocks, as ``torch.chunk`` splits; devlint checks only
    ``world_size * n`` samples, so every rank gets the same number (DDP averages gradients
    over ranks with equal weights, which equals the full-batch mean only for equal shards).

    Raises:
        ValueError: no tensor with a batch dimension, or fewer samples than ranks.
    """
    size = batch_size(batch) if size is None else size
    if size is None:
        raise ValueError("the batch holds no tensor with a batch dimension to split over ranks")
    n = size // world_size
    if n == 0:
        raise ValueError(f"the batch has {size} sample(s); world size {world_size} needs at least "
                         f"{world_size}")
    lo, hi = rank * n, (rank + 1) * n
    return map_tensors(lambda t: t[lo:hi] if t.dim() >= 1 and t.shape[0] == size else t, batch)


def truncate(batch, size: int, keep: int):
    """``batch`` with every tensor whose dim 0 is ``size`` cut to its first ``keep`` samples
    (a multiple of the world size); ``batch`` itself when nothing is cut."""
    if keep == size:
        return batch
    return map_tensors(lambda t: t[:keep] if t.dim() >= 1 and t.shape[0] == size else t, batch)
