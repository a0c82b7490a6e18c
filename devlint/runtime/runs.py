"""Replay a :class:`TrainingStep` per device and mode, judge each run, explain, build the report.

Order of work (the cost is a few plain steps, see docs/runtime.md "Cost"):

1. The CPU float32 reference runs on the stand-in device (:mod:`devlint.runtime.standin`):
   one run gives the reference numbers *and* the device-placement check. If the stand-in
   cannot finish, the reference is rerun plainly and the report says why (not ok).
2. Every other run is compared with it as it finishes (streamed: only per-parameter numbers
   are kept) by :func:`devlint.runtime.compare.measure`.
3. A low-precision run whose errors are beyond a few unit roundoffs is judged against a
   calibrated noise floor: the same step in float32 with only that dtype's rounding.
4. Failures are explained by diagnostic replays (:mod:`devlint.runtime.probes`).
"""

from __future__ import annotations

import contextlib
import copy
import math
import re
import warnings
from dataclasses import dataclass, field

import torch

from . import autocast_policy, by_module, emulate, probes, settle, standin, torch_modules
from .compare import (DTYPES, Delta, Errors, Rounding, Tolerances, Verdict, judge, measure, needs_floor,
                      resolve_tolerances, round_range, round_trip)
from .buffers import judge_state, measure_state, went_nonfinite
from .devices import unavailable as _available
from .explain import (cause_first, deprecations, master_weights, mismatch_finding, nonfinite_finding,
                      placement_findings, state_findings, underflow_finding)
from .names import first_line, raising_function, raising_module
from .report import Finding, Report, Run
from .workcopy import WorkingCopy, trim_heap
from .step import Parameters, TrainingStep, fixed_reseed, host_rng_kept, map_tensors, scalar_loss, seed_host

__all__ = ["check_step", "MODES", "DEVICES", "MAX_HALVINGS", "INIT_SCALE"]

MODES = ("float32", "bfloat16", "float16")
DEVICES = ("cpu", "cuda", "mps")
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
    r"|\"\w+\" not implemented for|no kernel image|unsupported (dtype|scalar ?type)", re.I)
#: A low-precision run that raised on mixed dtypes (``scatter_`` / ``index_put_`` / ``addmm``
#: of a float32 buffer and an autocast output, as HF BigBird's block-sparse attention).
_DTYPE_ERR = re.compile(r"dtype to be equal|same dtype|expected scalar type|dtypes? (must|to) match"
                        r"|but found (Float|BFloat16|Half)|Found dtype|expected both .* dtype", re.I)
_DEVICE_ERR = re.compile(r"same device|on the expected device|device mismatch|different devices"
                         r"|Expected all tensors to be on")


@dataclass
class _Raw:
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
    nonfinite: bool = False
    error: str | None = None
    error_kind: str | None = None  # "device", "fp16-grads", "unsupported", "other"
    module: str | None = None
    op: str | None = None  # the custom autograd Function that raised, if any
    rng_used: bool = False
    kernels: str | None = None  # CPU low-precision runs: "emulated" or "native"
    policy: str | None = None  # low-precision runs: whose autocast rules ("cuda", "cpu", "mps")
    mixes: list = field(default_factory=list)
    unmoved: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)  # references: buffers the step changed (CPU)
    state_nonfinite: list = field(default_factory=list)  # references: (name, count, numel)
    norms: dict = field(default_factory=dict)  # references: squared norms, filled by measure
    floor_errors: Errors | None = None  # the noise-floor run's, when one was measured
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


def _run(step: TrainingStep, device: str, mode: str, seed: int, *, keep: bool = False,
         stand_in: bool = False, round_to: str | None = None, init_scale: float = INIT_SCALE,
         ref: _Raw | None = None, kernels: str = "emulated", bench: WorkingCopy | None = None,
         on_graph: bool = False) -> _Raw:
    """One step on a deep copy of the model.

    ``keep``: keep grads and updates (a reference); else compare with ``ref`` as soon as the
    step is done. ``stand_in``: run on the stand-in device (float32 only). ``round_to``: the
    noise-floor run, float32 with parameters and inputs rounded to that mode's dtype.
    ``kernels``: ``"emulated"`` computes CPU bfloat16/float16 GEMMs and convolutions in float32
    (:mod:`devlint.runtime.emulate`), ``"native"`` runs PyTorch's CPU kernels. ``bench``:
    where the model copy comes from (one copy restored in place between runs), else a deep copy.
    ``on_graph``: float16 with the built-in step: settle the GradScaler's scale on this run's
    forward graph (:func:`devlint.runtime.settle.on_graph`) and step at the scale found.
    """
    trim_heap()
    raw = _Raw(device, mode)
    if device == "cpu" and mode != "float32" and not round_to:
        raw.kernels = kernels
    if mode != "float32" and not round_to:
        raw.policy = autocast_policy.current() if device == "cpu" else device
    emu = contextlib.ExitStack()
    model = None
    phase = "copying the model"
    tracker_parents: set = set()
    ctx = None
    range_hooks: list = []
    try:
        model = bench.take() if bench is not None else copy.deepcopy(step.model)
        batch = step.batch
        if mode == "float32" and any(p.dtype in _LOW for p in model.parameters()):
            model.float()  # the float32 run is float32 even for a model.half()
            batch = map_tensors(lambda t: t.float() if t.dtype in _LOW else t, batch)
        if round_to:
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(round_trip(p, round_to))
            batch = map_tensors(lambda t: round_trip(t, round_to), batch)
        start = {n: p for n, p in step.model.named_parameters()}
        if stand_in:
            raw.unmoved = standin.unregistered_tensors(model)
            ctx = standin.stand_in(model)
            mode_obj, tracker = ctx.__enter__()
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
        elif target != "cpu" or any(t.device.type != "cpu" for t in [*model.parameters(), *model.buffers()]):
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
        captured: dict = {}

        def capture(opt, args, kwargs):
            captured.clear()
            # the built-in step never touches the gradients after this: no copy needed
            own = step.step_fn is None
            captured.update({n: None if p.grad is None else (p.grad.detach() if own else p.grad.detach().clone())
                             for n, p in named})
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
        with torch.autocast(device_type=amp_device, dtype=DTYPES[mode], enabled=mode != "float32"):
            if step.step_fn is not None:
                loss = scalar_loss(step.step_fn(model, batch, optimizer, scaler))
            else:
                loss = scalar_loss(step.loss_fn(model, batch))
        raw.loss = float(loss.detach().float())
        if tracker is not None:
            tracker_parents = set(tracker.parents)
        if step.step_fn is None:
            if not math.isfinite(raw.loss):
                raw.nonfinite = True
                raw.skipped_steps = 0 if scaler.is_enabled() else None  # no scale helps a forward
                return raw
            if on_graph and scaler.is_enabled():
                k = settle.on_graph(loss, [p for _, p in named], init_scale, MAX_HALVINGS)
                if k is None:
                    return _every_scale_skipped(raw)
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
        if step.step_fn is not None and _update_missing(scaler):
            raw.error_kind, raw.module = "scaler-update", "step_fn (the training step)"
            raw.error = ("the step calls scaler.step(optimizer) but never scaler.update(): the scale "
                         "never adapts, and the next step's scaler.unscale_ or scaler.step raises")
            return raw
        if scaler.is_enabled():
            raw.scaler_used = scaler._scale is not None
            raw.scale = init_scale
            if raw.scaler_used and scaler.get_scale() < init_scale:
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

        def cpu(t):
            return (t.elem if isinstance(t, standin.Tagged) else t).detach().to("cpu", torch.float32)

        def update(n, p):
            before = start[n].detach().to("cpu", torch.float32)
            if round_to:
                before = round_trip(before, round_to)
            return cpu(p) - before

        optimizer.state.clear()  # its buffers are not compared: free them first
        state = _state(model, captured)
        before = dict(_state(step.model, None))
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
            raw.errors.state = measure_state(ref.state, before, ((n, _elem(t)) for n, t in state))
    except Exception as exc:  # noqa: BLE001 - every failure of the user's step is reported
        raw.error = first_line(exc)
        text = str(exc)
        if "unscale FP16 gradients" in text:
            raw.error_kind = "fp16-grads"
        elif _UNSUPPORTED.search(text) and mode != "float32":
            raw.error_kind = "unsupported"
        elif _DEVICE_ERR.search(text):
            raw.error_kind = "device"
        else:
            raw.error_kind = "other"
        raw.module = (raising_module(model, exc) or standin.module_label(model, tracker_parents)) \
            if phase == "step" and model is not None else f"({phase})"
        fn = raising_function(exc) if phase == "step" else None
        if fn is not None:
            _name_function(raw, step, model, exc, fn, seed)
    except SystemExit as exc:
        raw.error = f"the step called sys.exit({exc.code!r})"
        raw.error_kind = "exit"
        raw.module = f"({phase})"
    finally:
        emu.close()
        for h in range_hooks:
            h.remove()
        if ctx is not None:
            ctx.__exit__(None, None, None)
        if stand_in and bench is not None and model is not None:
            bench.reclaim(model)
    return raw


def _name_function(raw: _Raw, step: TrainingStep, model, exc: BaseException, fn: tuple[str, str],
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


def _state(model: torch.nn.Module, captured: dict | None) -> list[tuple[str, torch.Tensor]]:
    """What the step may change besides trained parameters: every buffer, and (``captured``
    given: the gradients the optimizer saw) every parameter that got no gradient (an EMA
    copy kept as a frozen parameter); with ``captured`` None, every parameter, as candidates."""
    out = list(model.named_buffers())
    out += [(n, p) for n, p in model.named_parameters() if captured is None or captured.get(n) is None]
    return out


def _unchanged(t: torch.Tensor, before: torch.Tensor) -> bool:
    return t.shape == before.shape and torch.equal(t.to("cpu", before.dtype), before.to("cpu"))


def _elem(t: torch.Tensor) -> torch.Tensor:
    return (t.elem if isinstance(t, standin.Tagged) else t).detach()


def _settled(step, device, mode, seed, ref, kernels: str = "emulated", bench=None) -> _Raw:
    """The float16 run with the GradScaler settled: the first scale 2**16 / 2**k (k <= 24)
    whose step is not skipped, found by bisection; ``skipped_steps = k``. With the built-in
    step the bisection runs on one forward graph (backward passes only, :mod:`settle`)."""
    raw = _run(step, device, mode, seed, ref=ref, kernels=kernels, bench=bench,
               on_graph=step.step_fn is None)
    if step.step_fn is None and raw.error and raw.error_kind == "other":
        # a graph that cannot be backpropagated twice (a checkpoint that frees what it
        # recomputes): replay the step per try instead
        raw = _run(step, device, mode, seed, ref=ref, kernels=kernels, bench=bench)
    elif step.step_fn is None and (raw.errors is not None or raw.error or raw.nonfinite):
        return raw
    if raw.skipped_steps is None:
        if raw.scale is not None:
            raw.skipped_steps = 0
        return raw
    lo, hi, best = 1, MAX_HALVINGS, None
    while lo <= hi:
        k = (lo + hi) // 2
        trial = _run(step, device, mode, seed, ref=ref, init_scale=INIT_SCALE / 2 ** k,
                     kernels=kernels, bench=bench)
        if trial.error or trial.nonfinite:
            return trial
        if trial.skipped_steps is None:
            best, trial.skipped_steps = trial, k
            hi = k - 1
        else:
            lo = k + 1
    return _every_scale_skipped(raw) if best is None else best


def _every_scale_skipped(raw: _Raw) -> _Raw:
    """``raw`` marked non-finite: the GradScaler skips the step at every scale tried."""
    raw.nonfinite = True
    raw.skipped_steps = MAX_HALVINGS
    raw.scale = INIT_SCALE / 2 ** MAX_HALVINGS
    raw.error = (f"GradScaler skipped every step: gradients are inf/NaN at every scale from "
                 f"2**16 down to 2**{16 - MAX_HALVINGS}")
    return raw


def _judge_run(step, raw: _Raw, ref: _Raw, tol: Tolerances, seed: int, cross_device: bool,
               bench=None) -> tuple[Verdict, list]:
    """Judge a finished run: its gradients (:func:`compare.judge`) and buffers
    (:func:`buffers.judge_state`, ``(name, error, limit)`` of those beyond tolerance); the
    noise floor is measured first when either exceeds the quick bound, then the wide floors
    while either is beyond it."""
    if raw.mode == "float32":
        return judge(raw.errors, "float32", tol, adaptive=raw.adaptive,
                     fixed_rtol=tol.float32_rtol if (cross_device or step.step_fn) else 1e-5), []
    grads_quick = not needs_floor(raw.errors, raw.mode, tol)
    quick = judge(raw.errors, raw.mode, tol, adaptive=raw.adaptive) if grads_quick else None
    state = judge_state(raw.errors.state, raw.mode, tol)
    if grads_quick and not state:
        return quick, []
    floor = _run(step, ref.device, "float32", seed, ref=ref, round_to=raw.mode, bench=bench)
    raw.floor_errors = None if grads_quick else floor.errors  # only the gradients use it there
    if floor.errors is None:
        return quick or judge(raw.errors, raw.mode, tol, adaptive=raw.adaptive), []
    # one perturbation is one sample of how many kinks get crossed: then a second, twice as
    # wide (measured: Reformer's LSH buckets failed the first at 4 of 25 seeds, by <= 1.31x)
    wide, scale = None, None
    for scale in (None, tol.k, 2 * tol.k):
        if scale is not None:
            run = _run(step, ref.device, "float32", seed, ref=ref, round_to=Rounding(raw.mode, scale),
                       bench=bench)
            if run.errors is None:
                break
            wide = run.errors
        verdict = quick or judge(raw.errors, raw.mode, tol, floor=floor.errors, adaptive=raw.adaptive,
                                 wide_floor=wide, wide_scale=scale if scale != tol.k else None)
        state = judge_state(raw.errors.state, raw.mode, tol, floor.errors.state,
                            wide.state if wide is not None else None) if state else []
        if verdict.ok and not state:
            break
    return verdict, state


def _check(step, devices, modes, tolerances, seed, extra_warnings=(), world_size=None,
           target=None, cpu_kernels: str = "auto", policy: str = "cuda", joined=None) -> Report | None:
    """:func:`check_step`, with the warnings raised while loading the step, the target it came
    from (every rank loads it), and ``joined``: the torchrun job this process is a rank of
    (:mod:`devlint.runtime.torchrun`); None on its ranks other than 0."""
    if not isinstance(step, TrainingStep):
        raise TypeError(f"check_step needs a TrainingStep, got {type(step).__name__}")
    if policy not in autocast_policy.POLICIES:
        raise ValueError(f"unknown autocast policy {policy!r}; use one of {', '.join(autocast_policy.POLICIES)}")
    modes = list(dict.fromkeys(modes or MODES))
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r}; use one of {', '.join(MODES)}")
    devices = list(dict.fromkeys(["cpu", *(devices or DEVICES)]))
    for d in devices:
        if d not in DEVICES:
            raise ValueError(f"unknown device {d!r}; use one of {', '.join(DEVICES)}")
    cpu_kernels = emulate.resolve(cpu_kernels, step.model)
    tols = resolve_tolerances(tolerances)
    dist, dist_caught = None, []
    if world_size is not None:  # first: its ranks fork from this process before CUDA starts here
        from .distributed import for_check_step

        dist, dist_caught = for_check_step(step, devices, seed, world_size, target, joined)
        if dist is None:  # a torchrun rank other than 0: rank 0 reports
            return None
    report = Report(step.name, seed, torch.__version__, cpu_kernels=cpu_kernels, autocast_policy=policy)
    lowp = policy if set(modes) - {"float32"} else "cpu"  # no autocast run: nothing to register
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda), host_rng_kept(), fixed_reseed(), \
            warnings.catch_warnings(record=True) as caught, autocast_policy.policy(lowp):
        warnings.simplefilter("always", DeprecationWarning)
        warnings.simplefilter("always", FutureWarning)
        _check_into(report, step, devices, modes, tols, seed, cpu_kernels)
    if dist is not None:
        report.runs += dist.runs
        report.findings += dist.findings
        report.notes += dist.notes
    report.findings.extend(deprecations([*extra_warnings, *dist_caught, *caught]))
    report.findings = cause_first(report.findings)
    for w in caught:
        if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    order = {d: i for i, d in enumerate(DEVICES)}
    morder = {m: i for i, m in enumerate(MODES)}
    report.runs.sort(key=lambda r: (order.get(r.device, 9), morder.get(r.mode, 9)))
    return report


def _check_into(report: Report, step, devices, modes, tols, seed, kernels: str = "emulated") -> None:
    mw = master_weights(step)
    if mw:
        report.findings.append(mw)
    bench = WorkingCopy(step.model)
    ref = _run(step, "cpu", "float32", seed, keep=True, stand_in=True, bench=bench)
    placement = placement_findings(ref)
    report.findings.extend(placement)
    if ref.error:
        plain = _run(step, "cpu", "float32", seed, keep=True, bench=bench)
        limit = ref.error.startswith(standin.StandInUnsupported.__name__)  # devlint's, not the step's
        if plain.error is None and not plain.nonfinite and not placement:
            report.findings.append(Finding(
                "probe-incomplete",
                f"the device-placement check (the step on a stand-in GPU) could not finish: "
                f"{ref.error}, in {ref.module}" + ("" if limit else "; placement is unchecked"),
                "check the step on a real GPU, or report this to devlint",
                module=ref.module, device="stand-in", mode="float32",
                severity="info" if limit else "error"))
        ref = plain
    runs: dict[tuple[str, str], _Raw] = {("cpu", "float32"): ref}
    broken = bool(ref.error or ref.nonfinite)
    if ref.error:
        kind = "the step called sys.exit" if ref.error_kind == "exit" else "the cpu float32 reference run raised"
        report.findings.append(Finding(
            "step-error", f"{kind}: {ref.error}" if ref.error_kind != "exit" else ref.error,
            "make the step run in float32 on the cpu first; nothing else can be compared",
            module=ref.module, op=ref.op, device="cpu", mode="float32",
            details={"exit": ref.error_kind == "exit"}))
    report.runs.append(Run("cpu", "float32", "reference" if not broken else
                           ("error" if ref.error else "non-finite"), loss=ref.loss, error=ref.error))
    if ref.nonfinite:
        report.findings.append(nonfinite_finding(step, ref, runs, seed))
    elif ref.state_nonfinite:
        report.findings.extend(state_findings(step, ref, [], seed))
    for device in devices:
        reason = _available(device)
        if reason:
            report.runs.append(Run(device, "-", "skipped", error=reason))
            continue
        dev_ref = ref
        for mode in ["float32", *(m for m in modes if m != "float32")]:
            if device == "cpu" and mode == "float32":
                continue
            if mode == "float32" and device != "cpu" and "float32" not in modes and not ref.rng_used:
                continue
            if broken:
                report.runs.append(Run(device, mode, "not compared",
                                       error="the cpu float32 reference failed"))
                continue
            cross = device != "cpu"
            if cross and mode == "float32" and ref.rng_used:
                # Dropout masks differ between the CPU and this device's generator: this
                # device's own float32 run becomes the reference of its other runs.
                dev_ref = _run(step, device, "float32", seed, keep=True)
                runs[(device, mode)] = dev_ref
                report.runs.append(Run(device, mode, "not compared", loss=dev_ref.loss, error=(
                    "the step draws random numbers (dropout) and the CPU and "
                    f"{device} generators differ; {device} runs are compared with this run")))
                if dev_ref.error or dev_ref.nonfinite:
                    report.runs[-1] = _row(step, dev_ref, ref, tols[mode], seed, True, report, runs)
                    dev_ref = ref
                continue
            if mode == "float16":
                raw = _settled(step, device, mode, seed, dev_ref, kernels, bench)
            else:
                raw = _run(step, device, mode, seed, ref=dev_ref, kernels=kernels, bench=bench)
            runs[(device, mode)] = raw
            report.runs.append(_row(step, raw, dev_ref, tols[mode], seed, cross and dev_ref is ref,
                                    report, runs, bench))


def _row(step, raw: _Raw, ref: _Raw, tol: Tolerances, seed: int, cross: bool, report: Report,
         runs: dict, bench=None) -> Run:
    run = Run(raw.device, raw.mode, "ok", loss=raw.loss, skipped_steps=raw.skipped_steps,
              scale=raw.scale, error=raw.error, kernels=raw.kernels, policy=raw.policy)
    if raw.error_kind == "unsupported":
        run.status = "unsupported"
        report.notes.append(f"{raw.device} {raw.mode} not checked: an op has no {raw.mode} kernel on "
                            f"{raw.device} ({raw.error})")
        return run
    if raw.nonfinite:
        run.status = "non-finite"
        report.findings.append(nonfinite_finding(step, raw, runs, seed))
        return run
    if raw.error:
        run.status = "error"
        if raw.error_kind == "device":
            if any(f.kind == "device-placement" for f in report.findings):
                run.error += " (see the device-placement findings)"
            else:
                report.findings.append(Finding(
                    "device-placement", f"the step fails on {raw.device} with a device mismatch: "
                    f"{raw.error}", "move every tensor the step uses with .to(device), or create it "
                    "with device=", module=raw.module, device=raw.device, mode=raw.mode))
        elif any(f.kind == "master-weights" for f in report.findings):
            run.error += " (see the master-weights finding)"
        elif raw.error_kind == "scaler-update":
            report.findings.append(Finding(
                "step-error", f"{raw.error} ({raw.device} {raw.mode})",
                "call scaler.update() once per step, right after scaler.step(optimizer)",
                module=raw.module, op="GradScaler.update", device=raw.device, mode=raw.mode,
                related="DEV204"))
        elif raw.error_kind == "exit":
            report.findings.append(Finding(
                "step-error", f"{raw.error} on {raw.device} {raw.mode}", "raise an exception instead "
                "of exiting", module=raw.module, device=raw.device, mode=raw.mode, details={"exit": True}))
        elif raw.mode != "float32" and _DTYPE_ERR.search(raw.error):
            report.findings.append(Finding(
                "step-error", f"the step raised {raw.error} on {raw.device} {raw.mode}: an op met "
                f"a float32 tensor and autocast's {raw.mode} output (the float32 run passes)",
                "decorate its forward with @torch.amp.custom_fwd(device_type=...) and its backward "
                "with @torch.amp.custom_bwd" if raw.op else
                "cast one operand to the other's dtype there (.to(x.dtype)), or run that code "
                "under torch.autocast(..., enabled=False) on .float() inputs",
                module=raw.module, op=raw.op, device=raw.device, mode=raw.mode))
        else:
            report.findings.append(Finding(
                "step-error", f"the step raised {raw.error} on {raw.device} {raw.mode}",
                f"run the step on {raw.device} in {raw.mode} directly to see the traceback",
                module=raw.module, op=raw.op, device=raw.device, mode=raw.mode))
        return run
    verdict, beyond = _judge_run(step, raw, ref, tol, seed, cross, bench)
    run.loss_err, run.grad_err, run.floor = verdict.loss_err, verdict.grad_err, verdict.floor
    run.update_err, run.how, run.excluded = verdict.update_err, verdict.how, verdict.excluded
    raw.ok = verdict.ok
    run.modules = by_module.module_rows(step.model, raw.errors, raw.floor_errors, tol, raw.mode,
                                        ref.grads if raw.mode == "float16" else None)
    if not verdict.ok:
        run.status = "mismatch"
        report.findings.append(mismatch_finding(step, raw, verdict, seed, tol))
    if raw.mode != "float32" and raw.errors is not None:
        known = {f.name for f in report.findings if f.kind == "non-finite"}
        buffers = [f for f in state_findings(step, raw, beyond, seed) if f.name not in known]
        if buffers:
            run.status, raw.ok = "mismatch", False
            report.findings.extend(buffers)
    if raw.mode == "float16":
        uf = underflow_finding(step, raw, ref, tol)
        if uf:
            report.findings.append(uf)
    return run


def check_step(step: TrainingStep, devices=None, modes=None, tolerances=None, seed: int = 0,
               world_size: int | None = None, cpu_kernels: str = "auto",
               autocast_policy: str = "cuda") -> Report:
    """Replay ``step`` on every device and precision, judge each run, explain what breaks.

    Runs, each on a deep copy of ``step.model`` with a fresh optimizer and
    ``torch.manual_seed(seed)`` (``step.model`` itself is never mutated, and the caller's RNG
    state is restored):

    - the CPU float32 reference, on a stand-in GPU that carries real data
      (:mod:`devlint.runtime.standin`): the same numbers as a plain CPU run, plus every op
      that would mix CPU and GPU tensors (``device-placement`` findings);
    - per device: ``bfloat16`` under ``torch.autocast``; ``float16`` under ``torch.autocast``
      with ``torch.amp.GradScaler``, its scale settled first (bisection over at most
      :data:`MAX_HALVINGS` halvings; skipped steps are reported, not failures); ``float32``
      on a device other than the CPU;
    - the CPU always; CUDA and MPS when present, else listed as skipped with the reason.

    Each run is judged against the reference by :mod:`devlint.runtime.compare`: relative
    gradient errors per parameter, calibrated against the dtype's noise floor on this model,
    scale-free, negligible-gradient parameters left out, updates judged only for optimizers
    linear in the gradient. When the step draws random numbers (dropout), runs on CUDA/MPS
    are judged against that device's own float32 run (generators differ across devices).

    Args:
        step: the :class:`TrainingStep`.
        devices: device types to try, from ``"cpu"``, ``"cuda"``, ``"mps"``; default all three.
            The CPU is always included.
        modes: precision modes from ``"float32"``, ``"bfloat16"``, ``"float16"``; default all.
            The CPU float32 reference always runs.
        tolerances: ``None`` (defaults, see :class:`Tolerances`), one :class:`Tolerances` for
            every mode, or a dict mode -> :class:`Tolerances`.
        seed: the RNG seed set before every run.
        world_size: also run the step under DDP (and FSDP) on this many processes and compare
            with one process (:func:`devlint.runtime.distributed.check_distributed`: gloo on
            the CPU, NCCL on CUDA); its rows, findings and notes join the report.
        cpu_kernels: how the CPU bfloat16/float16 runs compute GEMMs and convolutions:
            ``"emulated"`` in float32 from the low-precision operands, the result rounded
            once to the dtype, i.e. a GPU tensor-core GEMM's arithmetic
            (:mod:`devlint.runtime.emulate`; CPUs without bf16/fp16 matrix units run the
            native kernels ~30x slower than float32); ``"native"``: PyTorch's own CPU
            kernels; ``"auto"`` (default): emulated when the model's largest parameter has
            at least :data:`devlint.runtime.emulate.AUTO_MIN_ELEMENTS` elements, else native.
            Every other op runs natively either way. The choice made is in
            ``Report.cpu_kernels`` and each CPU low-precision row's ``Run.kernels``.
        autocast_policy: whose autocast rules the CPU bfloat16/float16 runs follow:
            ``"cuda"`` (default: they stand in for a CUDA GPU, so each op is cast as
            ``torch.autocast("cuda")`` casts it, :mod:`devlint.runtime.autocast_policy`) or
            ``"cpu"`` (PyTorch's CPU autocast, for training with CPU autocast). Real GPU rows
            always use their device's own autocast. In ``Report.autocast_policy`` and each
            low-precision row's ``Run.policy``.

    Returns:
        a :class:`Report`; ``report.ok`` is True when every run that ran is within tolerance
        (or unsupported on that device) and no finding is an error.

    Raises:
        TypeError: ``step`` is not a :class:`TrainingStep`, or bad ``tolerances``.
        ValueError: an unknown device or mode name, ``cpu_kernels`` or ``autocast_policy`` value,
            ``world_size < 2``, or a batch that cannot be split over ``world_size`` ranks.
    """
    return _check(step, devices, modes, tolerances, seed, world_size=world_size,
                  cpu_kernels=cpu_kernels, policy=autocast_policy)
