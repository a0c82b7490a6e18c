"""What one rank of the distributed check computes, in whatever process runs it (a child that
devlint started, or a process torchrun started): build the step (:class:`Source`), wrap the
model in ``DistributedDataParallel`` and run one step on the rank's shard, then the same under
FSDP2's ``fully_shard``; and the one training step (:func:`step_once`) that the one-process
runs share. Results are float32 CPU copies keyed by parameter name."""

from __future__ import annotations

import contextlib
import copy
import pickle
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn

from .names import first_line
from .own_autocast import OwnAutocast
from .sharding import shard_batch, truncate
from .step import Parameters, TrainingStep, map_tensors, scalar_loss

__all__ = ["Source", "Job", "params_of", "grads_of", "tensors_of", "rank_work", "step_once"]


@dataclass
class Source:
    """Where a rank gets its step: the object itself (inherited by fork or pickled), a zero-arg
    factory, or a ``path/file.py:NAME`` target loaded in the rank as ``devlint runtime`` does."""

    step: TrainingStep | None = None
    factory: Callable[[], TrainingStep] | None = None
    target: str | None = None

    def build(self, seed: int) -> TrainingStep:
        if self.target is not None:
            from .target import load_target

            return load_target(self.target, seed)[0]
        if self.factory is not None:
            torch.manual_seed(seed)
            step = self.factory()
            if not isinstance(step, TrainingStep):
                raise TypeError(f"the step factory returned {type(step).__name__}, not a TrainingStep")
            return step
        return self.step

    @property
    def per_rank(self) -> bool:
        """True when every rank builds its own model (a rank-dependent init can show)."""
        return self.step is None


@dataclass
class Job:
    source: Source
    world_size: int
    backend: str
    device: str
    seed: int
    timeout: float
    size: int
    keep: int
    fsdp: bool
    ddp_kwargs: dict
    folder: str
    batch: Any = None  # the parent's batch: every rank shards the same one
    # spawn/forkserver: ``(source, batch)`` as plain pickle bytes. multiprocessing's own pickler
    # would move tensors to shared memory, so every rank (and the caller's model) would train
    # one and the same storage.
    payload: bytes | None = None
    # what autocast regions the step opens follow on a CPU rank (:mod:`.own_autocast`)
    policy: str = "cuda"
    kernels: str = "native"


def _cpu(t: torch.Tensor | None) -> torch.Tensor | None:
    if t is None:
        return None
    if hasattr(t, "full_tensor"):  # a DTensor (FSDP2): gather the full value (a collective)
        t = t.full_tensor()
    return t.detach().to("cpu", torch.float32, copy=True)


def params_of(model: nn.Module) -> dict:
    """Parameter name -> its value, a float32 CPU copy (a DTensor gathered whole)."""
    return {n: _cpu(p) for n, p in model.named_parameters()}


def grads_of(model: nn.Module) -> dict:
    """Parameter name -> its gradient, a float32 CPU copy, or None; trained parameters only."""
    return {n: _cpu(p.grad) for n, p in model.named_parameters() if p.requires_grad}


def tensors_of(model: nn.Module) -> dict:
    """:func:`params_of` and the floating-point buffers, named ``"NAME (buffer)"``."""
    out = params_of(model)
    out.update({f"{n} (buffer)": _cpu(b) for n, b in model.named_buffers() if b.is_floating_point()})
    return out


def _ddp_class():
    from torch.nn.parallel import DistributedDataParallel

    class _DDP(DistributedDataParallel):
        """DDP that reads unknown attributes from the wrapped module, so a ``loss_fn`` written
        for the plain model (``model.config``, ``model.num_classes``) works unchanged."""

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                inner = self.__dict__.get("_modules", {}).get("module")
                if inner is None or name == "module":
                    raise
                return getattr(inner, name)

    return _DDP


class _AllReduceSum(torch.autograd.Function):
    """``all_reduce(SUM)`` with its gradient: each rank's input feeds every rank's output, so
    the gradient of an input is the all-reduced sum of the output gradients."""

    @staticmethod
    def forward(ctx, x):
        import torch.distributed as dist

        y = x.clone()
        dist.all_reduce(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        import torch.distributed as dist

        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class _GlooSyncBatchNorm(nn.modules.batchnorm._BatchNorm):
    """SyncBatchNorm for CPU ranks (torch's runs only on CUDA/XPU): the per-channel sum, sum of
    squares and count are all-reduced over the group with their gradients, in float64. devlint
    swaps a SyncBatchNorm's class to this one inside a gloo rank; parameters, buffers and names
    stay the same."""

    def _check_input_dim(self, x):
        if x.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {x.dim()}D input)")

    def forward(self, x):
        if not (self.training or self.running_mean is None):
            return nn.functional.batch_norm(x, self.running_mean, self.running_var, self.weight,
                                            self.bias, False, 0.0, self.eps)
        c = x.shape[1]
        dims = [0, *range(2, x.dim())]
        xd = x.double()
        count = torch.tensor([x.numel() / c], dtype=torch.float64, device=x.device)
        stats = _AllReduceSum.apply(torch.cat([xd.sum(dims), (xd * xd).sum(dims), count]))
        n = stats[-1]
        mean = stats[:c] / n
        var = (stats[c:2 * c] / n - mean * mean).clamp_min(0)
        if self.training and self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked += 1
                m = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                self.running_mean.mul_(1 - m).add_(mean.to(x.dtype), alpha=m)
                self.running_var.mul_(1 - m).add_((var * n / (n - 1)).to(x.dtype), alpha=m)
        shape = [1, c] + [1] * (x.dim() - 2)
        y = ((xd - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)).to(x.dtype)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y


def _gloo_sync_batchnorm(model: nn.Module) -> None:
    for mod in model.modules():
        if isinstance(mod, nn.SyncBatchNorm):
            mod.__class__ = _GlooSyncBatchNorm


def rank_work(rank: int, job: Job, device: torch.device, mark, out: dict) -> None:
    """What one rank does once it is in the process group: build the step, run it under DDP
    on its shard (then under FSDP), and put what the check compares into ``out`` (``as_built``,
    ``loss``, ``grads``, ``after``, ``fsdp``, and ``autocast``: the dtypes of the autocast
    regions the step opened, which on a CPU rank follow ``job.policy`` with ``job.kernels``,
    :class:`devlint.runtime.own_autocast.OwnAutocast`). ``mark(phase)`` is called as each
    phase of :data:`devlint.runtime.rank_processes.PHASES` starts. Exceptions from the step
    propagate."""
    import torch.distributed as dist

    mark("building the step")
    if job.payload is not None:
        job.source, job.batch = pickle.loads(job.payload)
    step = job.source.build(job.seed)
    model = step.model.to(device)
    if device.type == "cpu":
        _gloo_sync_batchnorm(model)
    out["as_built"] = tensors_of(model)
    pristine = copy.deepcopy(model) if job.fsdp else None
    full = truncate(step.batch if job.batch is None else job.batch, job.size, job.keep)
    batch = map_tensors(lambda t: t.to(device), shard_batch(full, rank, job.world_size, job.keep))
    mark("wrapping the model in DDP")
    ids = [device.index] if device.type == "cuda" else None
    ddp = _ddp_class()(model, device_ids=ids, **job.ddp_kwargs)
    dist.barrier()
    mark("forward (loss_fn)")
    rules = OwnAutocast(device.type, job.policy, job.kernels, model)
    with rules:
        out["loss"], out["grads"] = step_once(step, ddp, model, batch, job.seed, mark)
    out["after"] = params_of(model)
    if job.fsdp:
        del ddp
        mark("forward (loss_fn)", "FSDP ")
        with rules:
            out["fsdp"] = _fsdp_run(pristine, step, batch, job, lambda n: mark(n, "FSDP "))
    out["autocast"] = sorted(rules.dtypes)


def _fsdp_run(model, step, batch, job, mark) -> dict:
    """FSDP2: ``fully_shard(model)`` on the same initial weights, one step, full gradients."""
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError as exc:
        return {"skipped": f"torch.distributed.fsdp.fully_shard is not available ({first_line(exc)})"}
    try:
        fully_shard(model)
    except Exception as exc:  # noqa: BLE001 - an FSDP limitation, not the user's bug
        return {"skipped": f"fully_shard(model) raised {first_line(exc)}"}
    loss, grads = step_once(step, model, model, batch, job.seed, mark)
    return {"loss": loss, "grads": grads, "after": params_of(model)}


@contextlib.contextmanager
def _watch_clipping(before_clip, clip: bool):
    """Inside a ``step_fn``: call ``before_clip()`` when ``torch.nn.utils.clip_grad_norm_`` is
    first called, and clip only when ``clip`` (a shard's gradients are clipped after DDP
    averages them, never alone). A ``step_fn`` that imported the function by name keeps its
    own, which devlint cannot reach."""
    real = torch.nn.utils.clip_grad_norm_

    def watched(parameters, max_norm, norm_type=2.0, *args, **kwargs):
        parameters = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        before_clip()
        if clip:
            return real(parameters, max_norm, norm_type, *args, **kwargs)
        grads = [p.grad for p in parameters if p.grad is not None]
        if not grads:
            return torch.tensor(0.0)
        return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, norm_type)
                                                     for g in grads]), norm_type)

    torch.nn.utils.clip_grad_norm_ = torch.nn.utils.clip_grad.clip_grad_norm_ = watched
    try:
        yield
    finally:
        torch.nn.utils.clip_grad_norm_ = torch.nn.utils.clip_grad.clip_grad_norm_ = real


def step_once(step: TrainingStep, model: nn.Module, inner: nn.Module, batch, seed: int,
               mark=lambda phase: None, clip: bool = True) -> tuple[float, dict]:
    """One training step of ``model`` (the module, or its DDP/FSDP wrapper; ``inner`` is the
    module, whose names the results use): the built-in step (``loss_fn``, backward,
    ``clip_grad_norm``, ``optimizer.step()``, ``scheduler.step()``) or ``step.step_fn`` with
    a disabled GradScaler. Returns the loss and the gradients as ``optimizer.step`` saw them
    before clipping, float32 on the CPU (``step_fn``: at its first ``clip_grad_norm_`` or
    ``optimizer.step``). ``clip=False`` leaves clipping out."""
    optimizer = step.optimizer(Parameters(inner))
    scheduler = step.scheduler(optimizer) if step.scheduler else None
    if step.step_fn is not None:
        seen: list = []

        def capture(*_):
            if not seen:
                mark("optimizer step")
                seen.append(grads_of(inner))

        handle = optimizer.register_step_pre_hook(capture)
        dev = next((p.device.type for p in inner.parameters()), "cpu")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a disabled GradScaler warns on CPU
            scaler = torch.amp.GradScaler(dev, enabled=False)
        torch.manual_seed(seed)
        try:
            with _watch_clipping(capture, clip):
                loss = scalar_loss(step.step_fn(model, batch, optimizer, scaler), "step_fn")
        finally:
            handle.remove()
        return float(loss.detach().float()), seen[0] if seen else grads_of(inner)
    torch.manual_seed(seed)
    loss = scalar_loss(step.loss_fn(model, batch), "loss_fn")
    mark("backward")
    loss.backward()
    grads = grads_of(inner)
    mark("optimizer step")
    if step.clip_grad_norm is not None and clip:
        torch.nn.utils.clip_grad_norm_(inner.parameters(), step.clip_grad_norm)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return float(loss.detach().float()), grads
