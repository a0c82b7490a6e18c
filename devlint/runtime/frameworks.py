"""The :class:`~.step.TrainingStep` of a step a training framework already defines.

``TrainingStep.from_lightning`` and ``TrainingStep.from_hf_trainer`` build the step from the
keyword arguments these functions return (this module does not import :mod:`.step`, which
imports it). :func:`lightning_step` uses a ``LightningModule``'s own ``training_step`` (the loss) and
``configure_optimizers`` (the optimizer); :func:`hf_trainer_step` uses a Hugging Face
``transformers.Trainer``'s own ``compute_loss`` and ``create_optimizer``, and its
``max_grad_norm`` clipping. Neither framework is imported here: the objects are duck-typed,
so devlint needs neither installed. Each run gets a fresh optimizer built by the framework's
own code for that run's copy of the model (devlint never touches the objects passed in).
What runs is the step devlint replays (forward, ``scaler.scale(loss).backward()``, unscale,
clip, ``scaler.step``, ``update``), not the framework's training loop: its callbacks, loggers,
gradient accumulation and epoch-wise schedulers are not part of one step.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["lightning_step", "hf_trainer_step"]


def _lightning_optimizer(config: Any) -> tuple[torch.optim.Optimizer, Any]:
    """The optimizer (and a per-step scheduler, else None) out of any of the shapes
    ``configure_optimizers`` may return (Lightning's docs: an optimizer; a list or tuple of
    optimizers; two lists, optimizers and schedulers; a dict with ``"optimizer"`` and
    ``"lr_scheduler"``, itself a scheduler or a dict with ``"scheduler"`` and ``"interval"``;
    a list of such dicts).

    Raises:
        TypeError: no optimizer, or more than one (manual optimization: use ``step_fn``).
    """
    optimizers, schedulers = [], []
    if isinstance(config, torch.optim.Optimizer):
        optimizers = [config]
    elif isinstance(config, dict):
        optimizers, schedulers = [config.get("optimizer")], [config.get("lr_scheduler")]
    elif isinstance(config, (list, tuple)):
        if len(config) == 2 and all(isinstance(c, (list, tuple)) for c in config):
            optimizers, schedulers = list(config[0]), list(config[1])
        else:
            for item in config:
                if isinstance(item, dict):
                    optimizers.append(item.get("optimizer"))
                    schedulers.append(item.get("lr_scheduler"))
                else:
                    optimizers.append(item)
    optimizers = [o for o in optimizers if o is not None]
    if len(optimizers) != 1 or not isinstance(optimizers[0], torch.optim.Optimizer):
        raise TypeError(f"configure_optimizers() gave {len(optimizers)} optimizers; from_lightning "
                        "needs exactly one (for several, write a step_fn)")
    scheduler = next((s for s in schedulers if s is not None), None)
    interval = "epoch"
    if isinstance(scheduler, dict):
        interval = scheduler.get("interval", "epoch")
        scheduler = scheduler.get("scheduler")
    return optimizers[0], scheduler if interval == "step" else None


def lightning_step(module: torch.nn.Module, batch: Any, *, batch_idx: int = 0, name: str = "",
                   clip_grad_norm: float | None = None) -> dict:
    """The ``TrainingStep`` keyword arguments of a ``lightning.pytorch.LightningModule``'s
    step (or ``pytorch_lightning``'s).

    The loss is ``module.training_step(batch, batch_idx)`` (a tensor, or a dict with
    ``"loss"``, as Lightning accepts); the optimizer is what ``configure_optimizers()``
    returns, called on each run's copy of the module; a scheduler configured with
    ``"interval": "step"`` steps after the optimizer, as the Trainer does (the default,
    per epoch, is not part of one step). ``self.log`` calls are harmless without a Trainer.

    Args:
        module: the LightningModule, float32, on any device.
        batch: one batch as the module's ``training_step`` receives it (tensors in any
            nesting of tuples, lists and dicts).
        batch_idx: passed to ``training_step``.
        name: a label for reports (default: the module's class name).
        clip_grad_norm: the Trainer's ``gradient_clip_val`` (norm clipping after unscaling).

    Raises:
        TypeError: ``module`` has no ``training_step``/``configure_optimizers``, uses manual
            optimization (``automatic_optimization = False``: write a ``step_fn`` instead),
            or configures other than exactly one optimizer.
    """
    for hook in ("training_step", "configure_optimizers"):
        if not callable(getattr(module, hook, None)):
            raise TypeError(f"{type(module).__name__} has no {hook}(); pass a LightningModule")
    if getattr(module, "automatic_optimization", True) is False:
        raise TypeError(f"{type(module).__name__} uses manual optimization (its training_step "
                        "steps the optimizer itself): write a step_fn for TrainingStep instead")
    # once on the module itself (an optimizer over its parameters changes nothing in them): is
    # there exactly one optimizer, and a scheduler that steps with it?
    _, stepped = _lightning_optimizer(module.configure_optimizers())
    per_step: dict[int, Any] = {}

    def loss_fn(model, data):
        out = model.training_step(data, batch_idx)
        if isinstance(out, dict):
            out = out.get("loss")
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"training_step returned {type(out).__name__}, not a loss tensor "
                            "or a dict with 'loss'")
        return out

    def optimizer(params):  # a step.Parameters: its .model is this run's copy
        opt, scheduler = _lightning_optimizer(params.model.configure_optimizers())
        per_step[id(opt)] = scheduler
        return opt

    def scheduler(opt):
        return per_step.pop(id(opt))

    return {"model": module, "batch": batch, "loss_fn": loss_fn, "optimizer": optimizer,
            "name": name or type(module).__name__, "clip_grad_norm": clip_grad_norm,
            "scheduler": scheduler if stepped is not None else None}


def hf_trainer_step(trainer: Any, inputs: dict, *, name: str = "") -> dict:
    """The ``TrainingStep`` keyword arguments of the step a Hugging Face
    ``transformers.Trainer`` runs (a subclass's overrides included).

    The loss is ``trainer.compute_loss(model, inputs)`` (the model's own loss, the Trainer's
    label smoothing, or ``compute_loss_func``); the optimizer is ``trainer.create_optimizer(model)``
    for each run's copy of the model (AdamW with the weight-decay groups of
    ``TrainingArguments``, or ``optimizer_cls_and_kwargs``); gradients are clipped to
    ``args.max_grad_norm`` (default 1.0) after unscaling, as the Trainer does. The learning-rate
    schedule is left out: with warm-up its first step has lr 0, which would hide every update.

    Args:
        trainer: a ``transformers.Trainer`` built with its model (float32).
        inputs: one batch as the Trainer feeds the model: a dict of tensors (``input_ids``,
            ``labels``, ...).
        name: a label for reports (default: the model's class name).

    Raises:
        TypeError: ``trainer`` has no ``model``/``compute_loss``/``create_optimizer``, or was
            given an optimizer instance (``optimizers=(opt, sched)``): devlint builds one per
            run, so pass ``optimizer_cls_and_kwargs=(cls, kwargs)`` instead.
    """
    model = getattr(trainer, "model", None)
    for attr in ("compute_loss", "create_optimizer"):
        if not callable(getattr(trainer, attr, None)):
            raise TypeError(f"{type(trainer).__name__} has no {attr}(); pass a transformers.Trainer")
    if not isinstance(model, torch.nn.Module):
        raise TypeError("the Trainer has no model; build it with Trainer(model=...)")
    if getattr(trainer, "optimizer", None) is not None:
        raise TypeError("the Trainer holds an optimizer instance; devlint builds one per run: "
                        "pass optimizer_cls_and_kwargs=(cls, kwargs) to the Trainer instead")

    def loss_fn(copy, data):
        return trainer.compute_loss(copy, data)

    def optimizer(params):  # a step.Parameters: its .model is this run's copy
        try:
            return trainer.create_optimizer(params.model)
        finally:
            trainer.optimizer = None  # create_optimizer keeps it; the next run needs its own

    args = getattr(trainer, "args", None)
    clip = getattr(args, "max_grad_norm", None)
    return {"model": model, "batch": inputs, "loss_fn": loss_fn, "optimizer": optimizer,
            "name": name or type(model).__name__, "clip_grad_norm": clip if clip and clip > 0 else None}
