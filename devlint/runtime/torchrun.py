"""``devlint runtime`` started by torchrun joins that job as one of its ranks.

torchrun (``python -m torch.distributed.run``) starts the same command once per process, on
one machine or several, and tells each process its place in the environment: ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` (PyTorch documentation,
"torchrun (Elastic Launch)", section "Environment Variables"). When they are set,
``devlint runtime TARGET`` does not start processes of its own: every process runs its rank's
part of the distributed check (:func:`devlint.runtime.distributed.check_distributed`) in the
process group torchrun set up, and rank 0 compares, checks the step in one process as usual
and prints the report; the other ranks send it their results and exit 0.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Job", "job_from_env", "join", "JOIN_TIMEOUT"]

#: Seconds a rank may wait in a collective of the check: the ranks meet after each checked
#: the step in one process (seconds to minutes for a large model on a slow machine).
JOIN_TIMEOUT = 1800.0


@dataclass(frozen=True)
class Job:
    """This process's place in a torchrun job: ``rank`` of ``world_size`` processes,
    ``local_rank`` on its machine, the rendezvous host ``master``."""

    rank: int
    world_size: int
    local_rank: int
    master: str


def job_from_env(env: Mapping[str, str] | None = None) -> Job | None:
    """The torchrun job this process belongs to, from ``RANK``, ``WORLD_SIZE`` and
    ``MASTER_ADDR`` (``LOCAL_RANK`` defaults to ``RANK``); None when any is missing or the
    world has a single process.

    Raises:
        ValueError: ``RANK``, ``WORLD_SIZE`` or ``LOCAL_RANK`` is not an integer, or the rank
            is outside the world.
    """
    env = os.environ if env is None else env
    if not all(env.get(k) for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR")):
        return None
    try:
        rank, size = int(env["RANK"]), int(env["WORLD_SIZE"])
        local = int(env.get("LOCAL_RANK") or rank)
    except ValueError:
        raise ValueError("RANK, WORLD_SIZE and LOCAL_RANK must be integers (set by torchrun)") from None
    if not 0 <= rank < size:
        raise ValueError(f"RANK {rank} is outside WORLD_SIZE {size}")
    return Job(rank, size, local, env["MASTER_ADDR"]) if size > 1 else None


def join(job: Job, device: str) -> None:
    """Join the process group of ``job`` (``env://``, as torchrun expects): gloo for
    ``device="cpu"``, NCCL for ``"cuda"`` (this process's GPU is ``LOCAL_RANK``). Nothing
    is done when the group is already initialised. On a loopback rendezvous host gloo is
    told to use the loopback interface (``GLOO_SOCKET_IFNAME=lo``, unless set)."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if device == "cuda":
        torch.cuda.set_device(job.local_rank)
    elif job.master in ("127.0.0.1", "localhost", "::1") and "GLOO_SOCKET_IFNAME" not in os.environ \
            and os.path.exists("/sys/class/net/lo"):
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method="env://",
                            rank=job.rank, world_size=job.world_size,
                            timeout=datetime.timedelta(seconds=JOIN_TIMEOUT))
