"""The :class:`TrainingStep` a user hands to :func:`devlint.runtime.check_step`."""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from . import autocast_requests

__all__ = ["TrainingStep", "Parameters", "map_tensors", "seed_host", "host_rng_kept", "fixed_reseed",
           "scalar_loss", "eager"]

#: The seed of the current run and how many times the step called ``torch.seed()`` in it.
_RESEED = [0, 0]


def seed_host(seed: int) -> None:
    """Seed the generators besides torch's that a step may draw from: Python's ``random`` and
    numpy's global generator (when numpy is imported). Every run must draw the same random
    numbers, and some models draw from numpy: Hugging Face's Wav2Vec2/HuBERT SpecAugment
    masks and LayerDrop use ``np.random``."""
    random.seed(seed)
    _RESEED[:] = [seed, 0]
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % 2**32)


def _fixed_seed() -> int:
    """``torch.seed()`` made deterministic: the n-th call of a run seeds torch with a number
    that depends only on the run's seed and n."""
    _RESEED[1] += 1
    s = (_RESEED[0] * 1_000_003 + _RESEED[1]) % 2**63
    torch.manual_seed(s)
    return s


@contextlib.contextmanager
def fixed_reseed():
    """While the block runs, ``torch.seed()`` (which reseeds torch from the OS: a different
    draw every call) reseeds it deterministically instead (:func:`seed_host` restarts the
    count), so every run draws the same numbers. Hugging Face Reformer reseeds with
    ``torch.seed()`` before every layer in training (to replay its LSH rotations in the
    reversible backward): unpatched, every run hashed differently and the runs differed from
    each other by 0.2 % in loss whatever the precision."""
    saved = torch.seed, torch.random.seed
    torch.seed = torch.random.seed = _fixed_seed
    try:
        yield
    finally:
        torch.seed, torch.random.seed = saved


@contextlib.contextmanager
def host_rng_kept():
    """Restore the states of Python's ``random`` and numpy's global generator on exit (what
    :func:`torch.random.fork_rng` does for torch's)."""
    state = random.getstate()
    np = sys.modules.get("numpy")
    np_state = np.random.get_state() if np is not None else None
    try:
        yield
    finally:
        random.setstate(state)
        if np_state is not None:
            np.random.set_state(np_state)


# a model file imports TrainingStep before its classes are defined: from here on every
# torch.autocast region keeps the enabled flag asked for, which torch drops without CUDA
autocast_requests.remember()


class Parameters(list):
    """What the ``optimizer`` factory receives: the model's parameters, as a list.

    Being a list, it can be passed straight to any ``torch.optim`` class. It also carries
    ``named`` (``[(name, parameter), ...]`` as ``model.named_parameters()`` gives them) and
    ``model`` (the model copy of this run), for factories that build parameter groups from
    names, e.g. no weight decay for biases and norms::

        def make(params):
            decay = [p for n, p in params.named if p.ndim >= 2]
            rest = [p for n, p in params.named if p.ndim < 2]
            return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                      {"params": rest, "weight_decay": 0.0}], lr=1e-3)
    """

    def __init__(self, model: torch.nn.Module):
        self.named = list(model.named_parameters())
        self.model = model
        super().__init__(p for _, p in self.named)


@dataclass
class TrainingStep:
    """One training step, described so that devlint can replay it on any device and precision.

    Attributes:
        model: the ``torch.nn.Module`` to train, on any device and in any dtype (float32 is
            expected; see the ``master-weights`` finding). devlint only ever works on deep copies
            of it: the model you pass is never mutated, moved, or cast.
        batch: the inputs of one step: a tensor, or any nesting of tensors in tuples, lists,
            named tuples and dicts (non-tensor leaves are passed through unchanged). devlint
            moves every tensor to the device of each run with ``.to(device)``.
        loss_fn: ``loss_fn(model, batch) -> loss``, where ``loss`` is a scalar (0-dim, or one
            element) floating-point tensor. It runs inside ``torch.autocast`` for the
            mixed-precision runs, so it must not open its own autocast region or call
            ``backward``.
        optimizer: a factory ``optimizer(params) -> torch.optim.Optimizer``, for example
            ``lambda params: torch.optim.SGD(params, lr=0.01)``; called once per run, so every
            run starts with fresh optimizer state. ``params`` is a :class:`Parameters`: a list
            of the parameters that also has ``.named`` (name, parameter) pairs.
        name: a label for reports; defaults to the model's class name.
        step_fn: optional custom step ``step_fn(model, batch, optimizer, scaler) -> loss``
            replacing devlint's own forward/backward/step (``loss_fn`` is still required: the
            replays that look for the first op to go non-finite call it): it runs inside ``torch.autocast``
            for the mixed-precision runs and must do ``scaler.scale(loss).backward()``,
            ``scaler.unscale_(optimizer)`` before any clipping, ``scaler.step(optimizer)``
            and ``scaler.update()`` (``scaler`` is a ``torch.amp.GradScaler``, disabled
            outside float16, so the same code serves every mode), and return the loss
            (the last one, for gradient accumulation). Gradients are read when
            ``optimizer.step`` runs.
        clip_grad_norm: with the built-in step: clip the gradient norm to this value after
            unscaling (``torch.nn.utils.clip_grad_norm_``), as a training loop would.
        scheduler: with the built-in step: a factory ``scheduler(optimizer) -> LRScheduler``;
            ``scheduler.step()`` runs after the optimizer step.

    Raises:
        TypeError: a field has the wrong type (for example an optimizer instance instead of a
            factory).
    """

    model: torch.nn.Module
    batch: Any
    loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor]
    optimizer: Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]
    name: str = ""
    step_fn: Callable[..., torch.Tensor] | None = None
    clip_grad_norm: float | None = None
    scheduler: Callable[[torch.optim.Optimizer], Any] | None = None

    @classmethod
    def from_lightning(cls, module: torch.nn.Module, batch: Any, **options) -> "TrainingStep":
        """The step a ``LightningModule`` defines (its ``training_step`` and
        ``configure_optimizers``); see :func:`devlint.runtime.frameworks.lightning_step`."""
        from . import frameworks

        return cls(**frameworks.lightning_step(module, batch, **options))

    @classmethod
    def from_hf_trainer(cls, trainer: Any, inputs: Any, **options) -> "TrainingStep":
        """The step a Hugging Face ``transformers.Trainer`` runs (its ``compute_loss``,
        ``create_optimizer`` and ``max_grad_norm``); see
        :func:`devlint.runtime.frameworks.hf_trainer_step`."""
        from . import frameworks

        return cls(**frameworks.hf_trainer_step(trainer, inputs, **options))

    def __post_init__(self) -> None:
        if not isinstance(self.model, torch.nn.Module):
            raise TypeError(
                f"model is a {type(self.model).__name__}, not a torch.nn.Module; "
                "pass the module itself"
            )
        if isinstance(self.optimizer, torch.optim.Optimizer):
            raise TypeError(
                "optimizer is an Optimizer instance; pass a factory such as "
                "lambda params: torch.optim.SGD(params, lr=0.01)"
            )
        if not callable(self.optimizer):
            raise TypeError("optimizer is not callable; pass a factory params -> Optimizer")
        if not callable(self.loss_fn):
            raise TypeError("loss_fn is not callable; pass a function (model, batch) -> loss")
        if isinstance(self.loss_fn, torch.nn.modules.loss._Loss):
            raise TypeError(
                f"loss_fn is a loss module ({type(self.loss_fn).__name__}), called as loss_fn(model, batch); "
                "pass a function that runs the model, e.g. lambda m, b: criterion(m(b[0]), b[1])"
            )
        if self.step_fn is not None and not callable(self.step_fn):
            raise TypeError("step_fn is not callable; pass (model, batch, optimizer, scaler) -> loss")
        if self.scheduler is not None and not callable(self.scheduler):
            raise TypeError("scheduler is not callable; pass a factory optimizer -> LRScheduler")
        if self.step_fn is not None and (self.clip_grad_norm is not None or self.scheduler is not None):
            raise TypeError("clip_grad_norm and scheduler apply to the built-in step; "
                            "do them inside step_fn instead")
        if not self.name:
            self.name = type(self.model).__name__


def map_tensors(fn: Callable[[torch.Tensor], Any], obj: Any) -> Any:
    """Apply ``fn`` to every tensor in a nesting of tuples, named tuples, lists and dicts.

    Containers keep their type; other leaves are returned unchanged.
    """
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(map_tensors(fn, v) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_tensors(fn, v) for v in obj)
    if isinstance(obj, Mapping):
        items = [(k, map_tensors(fn, v)) for k, v in obj.items()]
        try:
            return type(obj)(items)
        except TypeError:  # a mapping type that cannot be built from pairs (defaultdict)
            return dict(items)
    return obj


def scalar_loss(loss, who: str = "the step") -> torch.Tensor:
    """``loss`` as a 0-dim tensor.

    Raises:
        TypeError: ``loss`` (what ``who`` returned) is not a one-element floating-point
            tensor.
    """
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"{who} returned {type(loss).__name__}; return a scalar tensor loss")
    if loss.numel() != 1 or not loss.is_floating_point():
        raise TypeError(f"{who} returned a {loss.dtype} tensor of shape {list(loss.shape)}; "
                        "return a scalar floating-point loss")
    return loss.reshape(())


def eager(step: TrainingStep) -> tuple[TrainingStep, str | None]:
    """``step`` with a model made by ``torch.compile`` (``OptimizedModule``) replaced by the module
    it wraps (``_orig_mod``, the same parameters), and a note that says so; ``(step, None)``
    otherwise. Every run of the check would compile the model again (new dtypes, the stand-in's
    tensors: minutes for a small MLP), and what the check compares, casting and placement, is
    the eager module's; the compiled kernels' own rounding is not compared."""
    orig = getattr(step.model, "_orig_mod", None)
    if not isinstance(orig, torch.nn.Module) or type(step.model).__name__ != "OptimizedModule":
        return step, None
    import dataclasses

    name = type(orig).__name__ if step.name == type(step.model).__name__ else step.name
    return dataclasses.replace(step, model=orig, name=name), (
        f"the model is torch.compile'd: checked as the module it wraps ({type(orig).__name__}, "
        "model._orig_mod), eagerly; the compiled kernels' own rounding is not compared")
