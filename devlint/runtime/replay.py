"""One replay of a :class:`TrainingStep` on one device in one precision mode: the model copy
moved and cast, the optimizer built, the step run under autocast (and a GradScaler in
float16), the gradients captured when ``optimizer.step`` runs, and either kept (a reference)
or compared with the reference at once (:func:`devlint.runtime.compare.measure`), so that only
per-parameter numbers outlive the run. A step that raises is recorded, not raised."""

from __future__ import annotations

import contextlib
import math
import re
import warnings
from dataclasses import dataclass, field

import torch

from . import (autocast_policy, emulate, probes, scaler_lifetime, scaler_order, settle, standin, standin_rnn,
               torch_modules)
from .scaled_grads import ScaledGrads
from .buffers import measure_state, went_nonfinite
from .clip_refusal import clip_refusal
from .compare import DTYPES, Delta, Errors, Rounding, measure, round_range, round_trip
from .grad_edits import GradEdits
from .names import first_line, raising_function, raising_module
from .own_autocast import cuda_on_cpu
from .step import Parameters, TrainingStep, fixed_reseed, map_tensors, scalar_loss, seed_host
from .workcopy import WorkingCopy, clone_model, trim_heap

__all__ = ["Raw", "run_once", "every_scale_skipped", "INIT_SCALE", "MAX_HALVINGS"]


#: torch.amp.GradScaler's default initial scale.
INIT_SCALE = 2.0 ** 16


#: The GradScaler may halve its scale at most this many times (2**16 down to 2**-8) before
#: devlint calls the gradients non-finite at every scale. Real training keeps halving, one
#: skipped step each time; devlint finds the first scale that works by bisection (~5 tries)
#: and reports how many steps training would skip.
MAX_HALVINGS = 24


_LOW = (torch.float16, torch.bfloat16)


#: Updates are judged only for torch.optim.SGD holding no state but these (momentum, Nesterov,
#: weight decay: the update is linear in the gradient). Every other optimizer is judged on its
#: gradients: the first step of Adam, Adafactor (row_var/col_var), RMSprop, Adagrad, Lion,
#: Rprop ... is about lr * sign(g) (or a factored, clipped version of it).
_LINEAR_STATE = {"momentum_buffer"}


_UNSUPPORTED = re.compile(
    r"not implemented for '(Half|BFloat16|ComplexHalf)'|could not create a (primitive|descriptor)"
    r"|does not support (half|bfloat16|float16)|Could not run '[\w:.]+' with arguments from the"
    r"|\"\w+\" not implemented for|no kernel image|unsupported (dtype|scalar ?type)"
    r"|doesn't support tensors of type: (Half|BFloat16)", re.I)


_DEVICE_ERR = re.compile(r"same device|on the expected device|device mismatch|different devices"
                         r"|Expected all tensors to be on")


@dataclass
class Raw:
    """One run: its numbers, while they are needed, and what happened."""

    device: str
    mode: str
    loss: float | None = None
    errors: Errors | None = None
    grads: dict = field(default_factory=dict)  # only kept for references
    updates: dict = field(default_factory=dict)
    lrs: dict = field(default_factory=dict)
    adaptive: bool = False
    skipped_steps: int | None = None
    scale: float | None = None
    scaler_used: bool = True
    disabled_scaler: bool = False  # the step called scale() of its own disabled GradScaler
    nonfinite: bool = False
    error: str | None = None
    error_kind: str | None = None  # "device", "fp16-grads", "unsupported", "other"
    module: str | None = None
    op: str | None = None  # the custom autograd Function that raised, if any
    rng_used: bool = False
    kernels: str | None = None  # CPU low-precision runs: "emulated" or "native"
    policy: str | None = None  # low-precision runs: whose autocast rules ("cuda", "cpu", "mps")
    regions: set = field(default_factory=set)  # dtypes of the step's own "cuda" regions (CPU runs)
    grad_edits: list = field(default_factory=list)  # gradients a step_fn changed before unscale_
    grad_unscaled: list = field(default_factory=list)  # gradients unscale_ divided that were never scaled
    grad_late: list = field(default_factory=list)  # gradients a scaled backward reached after unscale_
    scaled_autograd_grad: bool = False  # a step_fn took torch.autograd.grad of scaler.scale(...)
    fix: str | None = None  # a scaler misuse's own fix, when the step raised for it
    related: str | None = None  # the static rule of that misuse, when not DEV203's
    fresh_scaler: float | None = None  # float16: init_scale of a GradScaler the step made and dropped
    mixes: list = field(default_factory=list)
    unmoved: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)  # references: buffers the step changed (CPU)
    state_nonfinite: list = field(default_factory=list)  # references: (name, count, numel)
    norms: dict = field(default_factory=dict)  # references: squared norms (measure), modules, tiny counts
    floor_errors: Errors | None = None  # the noise-floor run's, when one was measured
    grad_max: float | None = None  # references: the largest |gradient| element (scale search hint)
    unlabelled: bool = False  # stand-in runs: a module's name was needed in backward (rerun)
    ok: bool = True  # set once judged


class _Captured(Exception):
    """Raised by the optimizer's pre-hook once the gradients are captured, to skip an update
    that nothing compares (see :func:`_update_unused`)."""


def _update_unused(step: TrainingStep, optimizer) -> bool:
    """Whether the optimizer's update can be skipped: a built-in adaptive optimizer (every
    ``torch.optim`` class but SGD, whose update is linear in the gradient and judged) in
    devlint's own step with no scheduler. Its first update is ~lr*sign(g), so updates are not
    compared (:class:`compare.Tolerances`); only the gradients captured before it are, and a
    built-in optimizer places its state on its parameters' device. Saves its state's
    allocation and the update in every run (on the stand-in, one dispatch per foreach op)."""
    return (step.step_fn is None and step.scheduler is None
            and type(optimizer).__module__.startswith("torch.optim.")
            and not isinstance(optimizer, torch.optim.SGD))


def run_once(step: TrainingStep, device: str, mode: str, seed: int, **kwargs) -> Raw:
    """One step on a copy of the model (:func:`_run_once`, whose arguments it takes). A
    stand-in run follows only the forward's modules at first; when it needed a module's name
    in backward (a backward op mixed devices or made a CPU tensor), it is run again with
    the backward's modules followed too (:class:`standin.Tracker`), so the names are those
    of a run that followed them throughout."""
    raw = _run_once(step, device, mode, seed, **kwargs)
    if raw.unlabelled:
        raw = _run_once(step, device, mode, seed, backward_labels=True, **kwargs)
    return raw


def _run_once(step: TrainingStep, device: str, mode: str, seed: int, *, keep: bool = False,
              stand_in: bool = False, round_to: str | None = None, init_scale: float = INIT_SCALE,
              ref: Raw | None = None, kernels: str = "emulated", bench: WorkingCopy | None = None,
              on_graph: bool = False, guess: int = 0, backward_labels: bool = False) -> Raw:
    """One step on a deep copy of the model.

    ``keep``: keep grads and updates (a reference); else compare with ``ref`` as soon as the
    step is done. ``stand_in``: run on the stand-in device (float32 only). ``round_to``: the
    noise-floor run, float32 with parameters and inputs rounded to that mode's dtype.
    ``kernels``: ``"emulated"`` computes CPU bfloat16/float16 GEMMs and convolutions in float32
    (:mod:`devlint.runtime.emulate`), ``"native"`` runs PyTorch's CPU kernels. ``bench``:
    where the model copy comes from (one copy restored in place between runs), else a deep copy.
    ``on_graph``: float16 with the built-in step: settle the GradScaler's scale on this run's
    forward graph (:func:`devlint.runtime.settle.on_graph`, its search starting at ``guess``
    halvings) and step at the scale found. ``backward_labels``: the stand-in run's tracker
    follows the backward's modules too (else ``Raw.unlabelled`` says when it had to).
    """
    trim_heap()
    raw = Raw(device, mode)
    if device == "cpu" and mode != "float32" and not round_to:
        raw.kernels = kernels
    if mode != "float32" and not round_to:
        raw.policy = autocast_policy.current() if device == "cpu" else device
    emu = contextlib.ExitStack()
    model = None
    phase = "copying the model"
    tracker_parents: set = set()
    tracker = None
    ctx = None
    range_hooks: list = []
    edits = None
    captured: dict = {}  # the gradients optimizer.step saw (set by its pre-hook)
    try:
        model = bench.take() if bench is not None else clone_model(step.model)
        batch = step.batch
        params = list(model.parameters())
        if mode == "float32" and any(p.dtype in _LOW for p in params):
            model.float()  # the float32 run is float32 even for a model.half()
            batch = map_tensors(lambda t: t.float() if t.dtype in _LOW else t, batch)
        if round_to:
            with torch.no_grad():
                for p in params:
                    p.copy_(round_trip(p, round_to))
            batch = map_tensors(lambda t: round_trip(t, round_to), batch)
        start = bench.original_parameters() if bench is not None else dict(step.model.named_parameters())
        if stand_in:
            raw.unmoved = standin.unregistered_tensors(model)
            ctx = contextlib.ExitStack()
            mode_obj, tracker = ctx.enter_context(standin.stand_in(model, backward_labels))
            ctx.enter_context(standin_rnn.recurrent_layers())
            raw.mixes = mode_obj.mixes
            range_hooks = torch_modules.input_hooks(model, mode_obj)
            target = standin.STAND_IN
        else:
            tracker = None
            target = device
        if round_to:
            range_hooks += _range_hooks(model, round_to)
        phase = "moving the model"
        if stand_in:
            standin.to_stand_in(model)
        elif target != "cpu" or any(t.device.type != "cpu" for t in [*params, *model.buffers()]):
            model.to(target)  # (on the CPU already: nothing to move, skip the walk over modules)
        batch = map_tensors(lambda t: t.to(target), batch)
        named = list(model.named_parameters())
        phase = "optimizer"
        try:
            optimizer = step.optimizer(Parameters(model))
        except Exception:
            if not stand_in or step.step_fn is not None:
                raise
            # still look for placement bugs (layers in a plain list leave nothing to optimize)
            with torch.autocast(device_type="cpu", enabled=False):
                scalar_loss(step.loss_fn(model, batch)).backward()
            raise
        if stand_in:
            standin.prefer_foreach(optimizer)
        raw.lrs = {}
        pid = {id(p): n for n, p in named}
        for group in optimizer.param_groups:
            for p in group["params"]:
                if id(p) in pid and isinstance(group.get("lr"), (int, float)):
                    raw.lrs[pid[id(p)]] = float(group["lr"])
        amp_device = "cpu" if stand_in else device
        scaler = torch.amp.GradScaler(amp_device, init_scale=init_scale, enabled=mode == "float16")
        if step.step_fn is not None and scaler.is_enabled():
            edits = GradEdits(model, scaler)
            raw.grad_edits = edits.touched
            raw.grad_unscaled = edits.unscaled
            raw.grad_late = edits.late

        def capture(opt, args, kwargs):
            captured.clear()
            # the built-in step never touches the gradients after this: no copy needed, and no
            # detach of a gradient that needs none (a dispatched op each on the stand-in)
            own = step.step_fn is None

            def kept(g):
                if g is None:
                    return None
                if own:
                    return g.detach() if g.requires_grad else g
                return g.detach().clone()

            captured.update({n: kept(p.grad) for n, p in named})
            for n, g in captured.items():  # sparse gradients (Embedding(sparse=True)): compare dense
                if g is not None and g.layout != torch.strided:
                    captured[n] = g.to_dense()

        skip_update = _update_unused(step, optimizer)

        def capture_only(opt, args, kwargs):
            capture(opt, args, kwargs)
            raise _Captured

        hook = optimizer.register_step_pre_hook(capture_only if skip_update else capture)
        model.zero_grad(set_to_none=True)
        if device == "cpu":  # the CPU generator only: torch.manual_seed queues lazy CUDA/XPU
            torch.default_generator.manual_seed(seed)  # seeding, with a traceback, every call
        else:
            torch.manual_seed(seed)
        seed_host(seed)
        emu.enter_context(fixed_reseed())
        rng_before = torch.get_rng_state()
        phase = "step"
        emu.enter_context(emulate.cpu_kernels(device, DTYPES[mode], kernels, model))
        # the CPU stands in for CUDA: regions and scalers the step makes for "cuda" are the CPU's
        own = (emu.enter_context(cuda_on_cpu(init_scale / INIT_SCALE, raw.regions))
               if device == "cpu" and autocast_policy.current() == "cuda" else [])
        scaled_grads = emu.enter_context(ScaledGrads()) if step.step_fn is not None and mode == "float16" else None
        with torch.autocast(device_type=amp_device, dtype=DTYPES[mode], enabled=mode != "float32"):
            if step.step_fn is not None:
                loss = scalar_loss(step.step_fn(model, batch, optimizer, scaler))
                raw.scaled_autograd_grad = scaled_grads is not None and scaled_grads.used
            else:
                loss = scalar_loss(step.loss_fn(model, batch))
        raw.loss = float(loss.detach().float())
        if tracker is not None:
            tracker_parents = set(tracker.parents)
        if step.step_fn is not None and not math.isfinite(raw.loss):
            # the forward overflowed (in the step's own region, it may be): no scale helps, and
            # gradients compared after it would be judged against a floor as non-finite
            raw.nonfinite = True
            raw.skipped_steps = 0 if any(s.is_enabled() for s in (scaler, *own)) else None
            return raw
        if step.step_fn is None:
            if not math.isfinite(raw.loss):
                raw.nonfinite = True
                raw.skipped_steps = 0 if scaler.is_enabled() else None  # no scale helps a forward
                return raw
            if on_graph and scaler.is_enabled():
                k = settle.on_graph(loss, [p for _, p in named], init_scale, MAX_HALVINGS, guess)
                if k is None:
                    return every_scale_skipped(raw)
                init_scale /= 2 ** k
                scaler = torch.amp.GradScaler(amp_device, init_scale=init_scale)
                scaler.scale(loss)  # sets the scale unscale_ divides by; the backward is done
                raw.skipped_steps = k
            else:
                scaler.scale(loss).backward()
            del loss  # frees a graph kept for settling
            emu.close()  # the optimizer step has no low-precision GEMMs: no dispatch cost there
            if scaler.is_enabled():
                scaler.unscale_(optimizer)
            if step.clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), step.clip_grad_norm)
            scheduler = step.scheduler(optimizer) if step.scheduler is not None else None
            try:
                scaler.step(optimizer)
            except _Captured:
                pass  # GradScaler.update needs only unscale_'s inf checks
            scaler.update()
            if scheduler is not None:
                with warnings.catch_warnings():  # a skipped float16 step warns, as in training
                    warnings.simplefilter("ignore", UserWarning)
                    scheduler.step()
        hook.remove()
        raw.rng_used = not torch.equal(rng_before, torch.get_rng_state())
        made = [s for s in getattr(own, "new", ()) if s is not scaler]  # the step's, not devlint's
        raw.disabled_scaler = any(s is not scaler for s in getattr(own, "disabled", ()))
        if mode == "float16" and step.step_fn is not None and made:
            raw.fresh_scaler = scaler_lifetime.step_local(made, (own, own.new))
        # the step's own scalers are judged in the float16 run (the one that settles the scale)
        scalers = [scaler, *own] if mode == "float16" else [scaler]
        if step.step_fn is not None and any(_update_missing(s) for s in scalers):
            raw.error_kind, raw.module = "scaler-update", "step_fn (the training step)"
            raw.error = ("the step calls scaler.step(optimizer) but never scaler.update(): the scale "
                         "never adapts, and the next step's scaler.unscale_ or scaler.step raises")
            return raw
        if scaler.is_enabled():
            used = [s for s in scalers if s._scale is not None]
            raw.scaler_used = bool(used)
            raw.scale = init_scale if scaler in used or not used else used[0]._init_scale
            if any(s.get_scale() < s._init_scale for s in used):
                raw.skipped_steps = 1  # the caller bisects on the scale
                return raw
        if not captured:
            if not math.isfinite(raw.loss):
                raw.nonfinite = True
                return raw
            raise RuntimeError("the step never called optimizer.step()")
        raw.adaptive = not isinstance(optimizer, torch.optim.SGD) or any(
            k not in _LINEAR_STATE for st in optimizer.state.values() for k in st)
        phase = "comparing"
        emu.close()
        if ctx is not None:  # the comparisons read the tensors' data: no per-op dispatch needed
            ctx.__exit__(None, None, None)
            ctx = None

        def cpu(t):
            return (t.elem if isinstance(t, standin.Tagged) else t).detach().to("cpu", torch.float32)

        def update(n, p):
            before = start[n].detach().to("cpu", torch.float32)
            if round_to:
                before = round_trip(before, round_to)
            return cpu(p) - before

        optimizer.state.clear()  # its buffers are not compared: free them first
        state = _state(model, captured, named)
        before = dict(bench.original_state() if bench is not None else  # (no autograd in the comparisons)
                      ((n, t.detach()) for n, t in _state(step.model, None)))
        if keep:
            # copies: the working copy's buffers are overwritten by the next run (WorkingCopy)
            raw.state = {n: _elem(t).to("cpu", torch.float32 if t.is_floating_point() else None, copy=True)
                         for n, t in state if n in before and not _unchanged(_elem(t), before[n])}
            raw.state_nonfinite = [(n, k, t.numel()) for n, t in state if n in before
                                   for k in [went_nonfinite(before[n], _elem(t), overflow_only=True)] if k]
            raw.grads = {n: None if g is None else cpu(g) for n, g in captured.items()}
            # updates are judged only for optimizers linear in the gradient: for the others the
            # reference keeps none (1x the parameter bytes saved) and update errors are not shown
            raw.updates = {} if raw.adaptive else {n: update(n, p) for n, p in named}
        else:
            updates = None if raw.adaptive else {n: Delta(_elem(p), start[n], round_to) for n, p in named}
            raw.errors = measure(ref.loss, ref.grads, ref.updates, raw.loss, captured.items(),
                                 updates, raw.lrs, zeros=mode == "float16", norms=ref.norms)
            raw.errors.state = measure_state(ref.state, before, ((n, _elem(t)) for n, t in state), ref.norms)
    except Exception as exc:  # noqa: BLE001 - every failure of the user's step is reported
        raw.error = first_line(exc)
        text = str(exc)
        if "unscale FP16 gradients" in text:
            raw.error_kind = "fp16-grads"
        elif "No inf checks were recorded prior to update" in text:  # GradScaler.update's assert
            raw.error_kind = "scaler-step"
            raw.op = "GradScaler.step"
            if captured:  # optimizer.step ran: on the scaled gradients
                raw.error = ("the step calls scaler.update() but never scaler.step(optimizer) (nor "
                             "scaler.unscale_): the optimizer applied gradients still multiplied by the "
                             f"loss scale ({scaler.get_scale():g}), and GradScaler.update raises "
                             f"\"{first_line(exc)}\"")
            else:
                raw.error = ("the step calls scaler.update() before any scaler.step(optimizer) since the "
                             "last update (once per micro-batch of an accumulation?), and "
                             f"GradScaler.update raises \"{first_line(exc)}\"")
                raw.fix = ("call scaler.step(optimizer) then scaler.update() once per optimizer step, "
                           "after the last micro-batch's backward")
        elif "but _scale is None" in text:  # GradScaler.step/unscale_ of a scaler that never scaled
            raw.error_kind, raw.op = "scaler-step", "GradScaler.scale"
            raw.error = ("the step calls scaler.step or scaler.unscale_ but never scaler.scale(loss): its "
                         f"backward ran on an unscaled loss, and GradScaler raises \"{first_line(exc)}\"")
            raw.fix = "backpropagate scaler.scale(loss), not the loss itself"
        elif "unscale_() has already been called on this optimizer since the last update()" in text:
            raw.error_kind, raw.op = "scaler-step", "GradScaler.unscale_"
            raw.error = ("the step calls scaler.unscale_(optimizer) again before scaler.update() (once per "
                         f"micro-batch of an accumulation?), and GradScaler raises \"{first_line(exc)}\"")
            raw.fix = ("call scaler.unscale_(optimizer) once per optimizer step, after the last "
                       "micro-batch's backward and before clipping")
        elif "is non-finite, so it cannot be clipped" in text:  # clip_grad_norm_(error_if_nonfinite=True)
            raw.error_kind, raw.op = "other", "torch.nn.utils.clip_grad_norm_"
            raw.error, raw.fix = clip_refusal(raw.error, scaler.get_scale() if mode == "float16" else None)
        elif (stepped := scaler_order.order_error(exc)) is not None:
            raw.error_kind, raw.related = "scaler-step", "DEV204"  # an update() missing between steps
            raw.op, raw.error, raw.fix = stepped
        elif _UNSUPPORTED.search(text) and mode != "float32":
            raw.error_kind = "unsupported"
        elif _DEVICE_ERR.search(text):
            raw.error_kind = "device"
        else:
            raw.error_kind = "other"
        raw.module = (raising_module(model, exc) or standin.module_label(model, tracker_parents)) \
            if phase == "step" and model is not None else f"({phase})"
        if raw.error_kind == "scaler-step":
            raw.module = "step_fn (the training step)"
        fn = raising_function(exc) if phase == "step" else None
        if fn is not None:
            _name_function(raw, step, model, exc, fn, seed)
    except SystemExit as exc:
        raw.error = f"the step called sys.exit({exc.code!r})"
        raw.error_kind = "exit"
        raw.module = f"({phase})"
    finally:
        emu.close()
        if edits is not None:
            edits.close()
        if tracker is not None:
            raw.unlabelled = mode_obj.unlabelled
        for h in range_hooks:
            h.remove()
        if ctx is not None:
            ctx.__exit__(None, None, None)
        if stand_in and bench is not None and model is not None:
            bench.reclaim(model)
    return raw


def _name_function(raw: Raw, step: TrainingStep, model, exc: BaseException, fn: tuple[str, str],
                   seed: int) -> None:
    """Name the custom autograd Function that raised (``fn`` from :func:`names.raising_function`)
    in ``raw.error`` and ``raw.op``, and the module that applied it in ``raw.module`` (a
    replay of the forward, :func:`probes.function_module`, unless its forward raised inside
    a module, which the traceback already names)."""
    node, method = fn
    name = node.removesuffix("Backward") if node.endswith("Backward") else node
    found = None
    if method != "forward" or raising_module(model, exc) is None:
        try:
            found = probes.function_module(step, node, seed)
        except Exception:  # noqa: BLE001 - the diagnosis is best effort
            found = None
    if found is not None:
        raw.module, cls = found
        name = cls.__qualname__
    raw.op = f"{name}.{method}"
    raw.error += f" (in {raw.op}, a custom torch.autograd.Function)"


def _update_missing(scaler: torch.amp.GradScaler) -> bool:
    """True when the step left the enabled ``scaler`` between ``unscale_``/``step`` and
    ``update`` for some optimizer (its per-optimizer stage is not back to ready, which only
    ``update()`` does; see ``torch/amp/grad_scaler.py``)."""
    if not scaler.is_enabled():
        return False
    from torch.amp.grad_scaler import OptState

    return any(st.get("stage") is not OptState.READY for st in scaler._per_optimizer_states.values())


def _range_hooks(model: torch.nn.Module, round_to) -> list:
    """Forward hooks that give every module's floating-point outputs (a tensor, or a tuple or
    list of them) what the dtype's range costs (:func:`compare.round_range`; float16 only):
    part of the noise floor, since autocast hands activations between modules in that dtype.
    Returns the handles, to remove after the run."""
    if (round_to.mode if isinstance(round_to, Rounding) else round_to) != "float16":
        return []

    def one(t):
        return round_range(t, round_to) if isinstance(t, torch.Tensor) else t

    def hook(_mod, _args, out):
        if isinstance(out, torch.Tensor):
            return one(out)
        if type(out) in (tuple, list):
            return type(out)(one(t) for t in out)
        return None

    return [m.register_forward_hook(hook) for m in model.modules()]


def _state(model: torch.nn.Module, captured: dict | None, named: list | None = None) -> list[tuple[str, torch.Tensor]]:
    """What the step may change besides trained parameters: every buffer, and (``captured``
    given: the gradients the optimizer saw) every parameter that got no gradient (an EMA
    copy kept as a frozen parameter); with ``captured`` None, every parameter, as candidates.
    ``named``: the model's ``named_parameters()`` already listed."""
    out = list(model.named_buffers())
    out += [(n, p) for n, p in (named if named is not None else model.named_parameters())
            if captured is None or captured.get(n) is None]
    return out


def _unchanged(t: torch.Tensor, before: torch.Tensor) -> bool:
    return t.shape == before.shape and torch.equal(t.to("cpu", before.dtype), before.to("cpu"))


def _elem(t: torch.Tensor) -> torch.Tensor:
    return (t.elem if isinstance(t, standin.Tagged) else t).detach()


def every_scale_skipped(raw: Raw) -> Raw:
    """``raw`` marked non-finite: the GradScaler skips the step at every scale tried."""
    raw.nonfinite = True
    raw.skipped_steps = MAX_HALVINGS
    raw.scale = INIT_SCALE / 2 ** MAX_HALVINGS
    raw.error = (f"GradScaler skipped every step: gradients are inf/NaN at every scale from "
                 f"2**16 down to 2**{16 - MAX_HALVINGS}")
    return raw
