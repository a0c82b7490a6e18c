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
import os
import re
import warnings
from dataclasses import dataclass, field

import torch

from . import autocast_policy, by_module, emulate, probes, standin
from .compare import (Delta, Errors, Rounding, Tolerances, Verdict, judge, measure, needs_floor,
                      resolve_tolerances, round_range, round_trip)
from .report import Finding, Report, Run
from .step import Parameters, TrainingStep, fixed_reseed, host_rng_kept, map_tensors, seed_host

__all__ = ["check_step", "MODES", "DEVICES", "MAX_HALVINGS", "INIT_SCALE"]

MODES = ("float32", "bfloat16", "float16")
DEVICES = ("cpu", "cuda", "mps")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
#: torch.amp.GradScaler's default initial scale.
INIT_SCALE = 2.0 ** 16
#: The GradScaler may halve its scale at most this many times (2**16 down to 2**-8) before
#: devlint calls the gradients non-finite at every scale. Real training keeps halving, one
#: skipped step each time; devlint finds the first scale that works by bisection (~5 tries)
#: and reports how many steps training would skip.
MAX_HALVINGS = 24
#: At most this many parameters are listed per mismatching run.
MAX_LISTED = 5
_HERE = os.path.dirname(os.path.abspath(__file__))
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
    rng_used: bool = False
    kernels: str | None = None  # CPU low-precision runs: "emulated" or "native"
    policy: str | None = None  # low-precision runs: whose autocast rules ("cuda", "cpu", "mps")
    mixes: list = field(default_factory=list)
    unmoved: dict = field(default_factory=dict)
    norms: dict = field(default_factory=dict)  # references: squared norms, filled by measure
    floor_errors: Errors | None = None  # the noise-floor run's, when one was measured
    ok: bool = True  # set once judged


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0].rstrip(".")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _scalar_loss(loss) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"the step returned {type(loss).__name__}; return a scalar tensor loss")
    if loss.numel() != 1 or not loss.is_floating_point():
        raise TypeError(f"the step returned a {loss.dtype} tensor of shape {list(loss.shape)}; "
                        "return a scalar floating-point loss")
    return loss.reshape(())


_MALLOC_TRIM: list = []


def _trim() -> None:
    """Give the heap memory freed by the previous run back to the OS (glibc's
    ``malloc_trim(0)``; a no-op where there is no glibc). Without it glibc keeps those blocks,
    and the process's peak resident memory grows run after run by fragmentation rather than by
    what a run holds (measured on the zoo's medium BERT: ~1-2x the parameter bytes)."""
    if not _MALLOC_TRIM:
        try:
            import ctypes

            _MALLOC_TRIM.append(ctypes.CDLL("libc.so.6").malloc_trim)
        except (OSError, AttributeError):
            _MALLOC_TRIM.append(None)
    if _MALLOC_TRIM[0] is not None:
        _MALLOC_TRIM[0](0)


class _Bench:
    """One working copy of ``step.model`` for the runs of a check, restored in place between
    runs instead of deep-copying the model each time (the deep copy is Python work per module,
    up to ~0.7 plain steps on a small convnet).

    :meth:`take` returns the copy with every parameter and buffer copied back from the
    original (``torch.no_grad``), gradients set to None. It deep-copies afresh whenever the
    copy no longer matches the original: another set of parameters or buffers, of another
    type, shape, dtype or device, other ties, or another value of any plain attribute (bool,
    int, float, str, None: ``training``, counters a forward may bump) of any module.
    """

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.copy: torch.nn.Module | None = None
        self._sig, self._src = self._signature(model)

    @staticmethod
    def _signature(model) -> tuple[tuple, list]:
        """(the signature take() compares, the parameters and buffers in its order), in one
        walk over the modules."""
        tensors, plain = [], []
        for prefix, mod in model.named_modules(remove_duplicate=False):
            for store in (mod._parameters, mod._buffers):
                tensors += [(f"{prefix}.{k}" if prefix else k, t) for k, t in store.items() if t is not None]
            plain += [(k, v) for k, v in vars(mod).items() if v is None or type(v) in (bool, int, float, str)]
        first: dict[int, int] = {}
        ties = tuple(first.setdefault(id(t), i) for i, (_, t) in enumerate(tensors))
        meta = tuple((n, type(t), t.shape, t.dtype, t.device, t.requires_grad) for n, t in tensors)
        return (meta, ties, tuple(plain)), [t for _, t in tensors]

    def take(self) -> torch.nn.Module:
        """The working copy, equal to ``step.model`` in every parameter, buffer and plain
        attribute, without gradients."""
        if self.copy is not None:
            sig, dst = self._signature(self.copy)
            if sig == self._sig:
                with torch.no_grad():
                    torch._foreach_copy_(dst, self._src)
                for t in dst:
                    t.grad = None
                return self.copy
        self.copy = None
        self.copy = copy.deepcopy(self.model)
        return self.copy

    def reclaim(self, model: torch.nn.Module) -> None:
        """Take back the copy after a run on the stand-in device: its parameters and buffers
        become plain CPU tensors again (the stand-in's own data, ties kept), so the next
        :meth:`take` need not deep-copy. The copy is dropped instead when a stand-in tensor
        is left anywhere else in a module's attributes (a cache made in forward)."""
        if model is not self.copy:
            return
        plain: dict[int, torch.Tensor] = {}
        for mod in model.modules():
            for store, make in ((mod._parameters, _as_parameter), (mod._buffers, lambda t: t.elem)):
                for name, t in store.items():
                    if isinstance(t, standin.Tagged):
                        if id(t) not in plain:
                            plain[id(t)] = make(t)
                        store[name] = plain[id(t)]
        model._apply(lambda t: t)  # what modules derive from their parameters (RNN flat weights)
        if any(_holds_tagged(v) for mod in model.modules() for k, v in vars(mod).items()
               if k not in ("_parameters", "_buffers", "_modules")):
            self.copy = None


def _as_parameter(t: "standin.Tagged") -> torch.nn.Parameter:
    return torch.nn.Parameter(t.elem.detach(), requires_grad=t.requires_grad)


def _holds_tagged(obj, depth: int = 3) -> bool:
    """Whether a stand-in tensor is in ``obj`` or in its lists, tuples, dicts and object
    attributes, ``depth`` levels down."""
    if isinstance(obj, torch.Tensor):
        return isinstance(obj, standin.Tagged)
    if depth == 0 or isinstance(obj, (str, bytes, int, float, bool, type(None), torch.nn.Module)):
        return False
    if isinstance(obj, dict):
        return any(_holds_tagged(v, depth - 1) for v in obj.values())
    if isinstance(obj, (list, tuple, set)):
        return any(_holds_tagged(v, depth - 1) for v in obj)
    attrs = getattr(obj, "__dict__", None)
    return isinstance(attrs, dict) and any(_holds_tagged(v, depth - 1) for v in attrs.values())


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


class _StepRaised(Exception):
    """SystemExit/KeyboardInterrupt-free wrapper for a step that called sys.exit()."""


def _run(step: TrainingStep, device: str, mode: str, seed: int, *, keep: bool = False,
         stand_in: bool = False, round_to: str | None = None, init_scale: float = INIT_SCALE,
         ref: _Raw | None = None, kernels: str = "emulated", bench: _Bench | None = None) -> _Raw:
    """One step on a deep copy of the model.

    ``keep``: keep grads and updates (a reference); else compare with ``ref`` as soon as the
    step is done. ``stand_in``: run on the stand-in device (float32 only). ``round_to``: the
    noise-floor run, float32 with parameters and inputs rounded to that mode's dtype.
    ``kernels``: ``"emulated"`` computes CPU bfloat16/float16 GEMMs and convolutions in float32
    (:mod:`devlint.runtime.emulate`), ``"native"`` runs PyTorch's CPU kernels. ``bench``:
    where the model copy comes from (one copy restored in place between runs), else a deep copy.
    """
    _trim()
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
            target = standin.STAND_IN
        else:
            tracker = None
            target = device
        if round_to:
            range_hooks = _range_hooks(model, round_to)
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
                _scalar_loss(step.loss_fn(model, batch)).backward()
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
                loss = _scalar_loss(step.step_fn(model, batch, optimizer, scaler))
            else:
                loss = _scalar_loss(step.loss_fn(model, batch))
        raw.loss = float(loss.detach().float())
        if tracker is not None:
            tracker_parents = set(tracker.parents)
        if step.step_fn is None:
            if not math.isfinite(raw.loss):
                raw.nonfinite = True
                raw.skipped_steps = 0 if scaler.is_enabled() else None  # no scale helps a forward
                return raw
            scaler.scale(loss).backward()
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
        if keep:
            raw.grads = {n: None if g is None else cpu(g) for n, g in captured.items()}
            # updates are judged only for optimizers linear in the gradient: for the others the
            # reference keeps none (1x the parameter bytes saved) and update errors are not shown
            raw.updates = {} if raw.adaptive else {n: update(n, p) for n, p in named}
        else:
            updates = None if raw.adaptive else {n: Delta(_elem(p), start[n], round_to) for n, p in named}
            raw.errors = measure(ref.loss, ref.grads, ref.updates, raw.loss, captured.items(),
                                 updates, raw.lrs, zeros=mode == "float16", norms=ref.norms)
    except Exception as exc:  # noqa: BLE001 - every failure of the user's step is reported
        raw.error = _first_line(exc)
        text = str(exc)
        if "unscale FP16 gradients" in text:
            raw.error_kind = "fp16-grads"
        elif _UNSUPPORTED.search(text) and mode != "float32":
            raw.error_kind = "unsupported"
        elif _DEVICE_ERR.search(text):
            raw.error_kind = "device"
        else:
            raw.error_kind = "other"
        raw.module = (_raising_module(model, exc) or standin.module_label(model, tracker_parents)) \
            if phase == "step" and model is not None else f"({phase})"
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


def _raising_module(model: torch.nn.Module, exc: BaseException) -> str | None:
    """The innermost module of ``model`` whose ``forward`` (or any method) is on the traceback
    of ``exc``, as ``"path (Class)"``; None when the step raised outside the model. (The
    module tracker's record is only read after the forward, so it cannot name it.)"""
    names = {id(m): n for n, m in model.named_modules()}
    found = None
    tb = exc.__traceback__
    while tb is not None:
        me = tb.tb_frame.f_locals.get("self")
        if me is not None and id(me) in names:
            found = me
        tb = tb.tb_next
    if found is None:
        return None
    path = names[id(found)]
    return f"{path} ({type(found).__name__})" if path else f"{type(model).__name__} (the model itself)"


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


def _elem(t: torch.Tensor) -> torch.Tensor:
    return (t.elem if isinstance(t, standin.Tagged) else t).detach()


def _settled(step, device, mode, seed, ref, kernels: str = "emulated", bench=None) -> _Raw:
    """The float16 run with the GradScaler settled: the first scale 2**16 / 2**k (k <= 24)
    whose step is not skipped, found by bisection; ``skipped_steps = k``."""
    raw = _run(step, device, mode, seed, ref=ref, kernels=kernels, bench=bench)
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
    if best is None:
        raw.nonfinite = True
        raw.skipped_steps = MAX_HALVINGS
        raw.scale = INIT_SCALE / 2 ** MAX_HALVINGS
        raw.error = (f"GradScaler skipped every step: gradients are inf/NaN at every scale from "
                     f"2**16 down to 2**{16 - MAX_HALVINGS}")
        return raw
    return best


def _available(device: str) -> str | None:
    """None when ``device`` can run here, else the reason it cannot."""
    if device == "cpu":
        return None
    if device == "cuda":
        return None if torch.cuda.is_available() else "no CUDA device (torch.cuda.is_available() is False)"
    if device == "mps":
        mps = getattr(torch.backends, "mps", None)
        ok = mps is not None and mps.is_available()
        return None if ok else "no MPS device (torch.backends.mps.is_available() is False)"
    return f"unknown device {device!r}"


def _module_of(model: torch.nn.Module, param: str) -> str:
    path = param.rsplit(".", 1)[0] if "." in param else ""
    if not path:
        return f"{type(model).__name__} (the model itself)"
    try:
        return f"{path} ({type(model.get_submodule(path)).__name__})"
    except AttributeError:
        return path


_MISMATCH = 'on a GPU this step fails with "Expected all tensors to be on the same device"'


def placement_findings(raw: _Raw) -> list[Finding]:
    """Turn the stand-in run's mixes into ``device-placement`` findings, one per distinct
    tensor (a layer in a plain list counts once)."""
    findings: list[Finding] = []
    seen: set = set()
    for mix in raw.mixes:
        kind, name, holder = (raw.unmoved.get(mix.key[1], (None,) * 3) if mix.key[0] == "id"
                              else (None,) * 3)
        key = (kind, holder or name) if kind else mix.key
        if key in seen:
            continue
        seen.add(key)
        where = f"{mix.op} in {mix.module}" + (" (backward)" if mix.backward else "")
        if kind == "attribute":
            findings.append(Finding(
                "device-placement",
                f"tensor attribute {name} is a plain tensor, not a buffer, so model.to(device) "
                f"leaves it on the CPU; {where} uses it with tensors on the GPU: {_MISMATCH}",
                "register it in __init__ with self.register_buffer(...)",
                module=mix.module, name=name, op=mix.op, device="stand-in", related="DEV113"))
        elif kind == "list":
            container = name.split("[", 1)[0]
            findings.append(Finding(
                "device-placement",
                f"layer {holder} is held in the plain Python container {container}, so "
                f"model.to(device) leaves its parameters on the CPU and the optimizer never sees "
                f"them; {mix.op} uses {name} with tensors on the GPU: {_MISMATCH}",
                f"hold the layers in nn.ModuleList (or nn.ModuleDict) instead of {container}",
                module=f"{holder}, in a plain container", name=name, op=mix.op, device="stand-in",
                related="DEV114"))
        elif mix.key[0] == "made":
            maker, maker_module = mix.key[1], mix.key[2]
            findings.append(Finding(
                "device-placement",
                f"{maker} in {maker_module} creates a tensor on the CPU (no device=), and {where} "
                f"uses it (shape {mix.shape}) with tensors on the GPU: {_MISMATCH}",
                "pass device=x.device to the factory (or use a registered buffer)",
                module=maker_module, name=f"tensor of shape {mix.shape} from {maker}", op=mix.op,
                device="stand-in", related="DEV112"))
        else:
            findings.append(Finding(
                "device-placement",
                f"a CPU tensor of shape {mix.shape} that the step never moves (a global, a closure, "
                f"or a batch object devlint cannot walk) is used with tensors on the GPU in {where}; "
                f"{_MISMATCH}",
                "move it with .to(device) where the model is moved, or make it a buffer",
                module=mix.module, name=f"tensor of shape {mix.shape}", op=mix.op, device="stand-in"))
    return findings


def _master_weights(step: TrainingStep) -> Finding | None:
    low = [(n, p.dtype) for n, p in step.model.named_parameters() if p.dtype in _LOW]
    if not low:
        return None
    name, dtype = low[0]
    dt = str(dtype).replace("torch.", "")
    more = f" and {len(low) - 1} more" if len(low) > 1 else ""
    return Finding(
        "master-weights",
        f"{len(low)} parameters are {dt}, not float32 ({name}{more}): updates smaller than "
        f"{dt} resolution are lost, and torch.amp.GradScaler raises \"Attempting to unscale FP16 "
        "gradients\"",
        "keep the model in float32 (drop model.half()) and let torch.autocast cast per op",
        module=_module_of(step.model, name), name=name, op="GradScaler.unscale_",
        related="DEV208", details={"count": len(low), "dtype": dt})


def _nonfinite_finding(step: TrainingStep, raw: _Raw, runs: dict, seed: int) -> Finding:
    dtype = DTYPES[raw.mode]
    try:
        nf = probes.nonfinite_probe(step, raw.device, dtype, seed, scale=raw.scale or 1.0,
                                    kernels=raw.kernels or "emulated")
    except Exception as exc:  # noqa: BLE001
        nf, why = None, _first_line(exc)
    else:
        why = "no op produced inf/NaN when replayed"
    clean = ""
    if raw.mode == "float16":
        o = runs.get((raw.device, "bfloat16"))
        if o is not None and o.error is None and not o.nonfinite and o.ok:
            clean = f"; bfloat16 runs clean on {raw.device} (same exponent range as float32)"
        elif o is not None:
            clean = f"; bfloat16 is not clean on {raw.device} either"
    what = "the loss is inf/NaN" if raw.error is None else raw.error
    if nf is None:
        return Finding("non-finite", f"{what} in the {raw.mode} run ({why}){clean}",
                       "find the overflowing op by running the step under torch.autograd.detect_anomaly",
                       device=raw.device, mode=raw.mode)
    ins = ", ".join(f"{d} {s} in [{lo:.3g}, {hi:.3g}]" for d, s, lo, hi in nf.inputs) or "no float inputs"
    limit = f" ({raw.mode} max {torch.finfo(dtype).max:g})" if raw.mode != "float32" else ""
    phase = "backward of " if nf.backward else ""
    if nf.inputs_finite:
        msg = (f"{what} in the {raw.mode} run: the first op whose output is inf/NaN is {phase}{nf.op} in "
               f"{nf.module}, output {nf.out_dtype}, inputs {ins}{limit}{clean}")
    else:
        msg = (f"{what} in the {raw.mode} run: {nf.module} already holds inf/NaN before the step{clean}")
    fix = ("use dtype=torch.bfloat16 in autocast, scale values down before this op, or run it in "
           "float32 with torch.autocast(..., enabled=False)")
    if raw.mode == "float32":
        fix = "keep this op's inputs in its domain (no log of negatives, no 0/0)"
    return Finding("non-finite", msg, fix, module=nf.module, op=nf.op, device=raw.device,
                   mode=raw.mode, details={"inputs": [list(i) for i in nf.inputs],
                                           "backward": nf.backward, "out_dtype": nf.out_dtype})


def _mismatch_finding(step, raw: _Raw, verdict: Verdict, seed: int, tol: Tolerances) -> Finding:
    model = step.model
    listed = verdict.worst[:MAX_LISTED]
    names = "largest parts: " + ", ".join(f"{n} (its own error {e:.1e})" for n, e, _ in listed)
    more = f" and {len(verdict.worst) - MAX_LISTED} more" if len(verdict.worst) > MAX_LISTED else ""
    first = listed[0][0].replace(" (update)", "") if listed else None
    module = _module_of(model, first) if first else "loss_fn"
    culprit = ""
    details = {"worst": [list(w) for w in verdict.worst[:20]], "grad_err": verdict.grad_err,
               "floor": verdict.floor, "loss_err": verdict.loss_err}
    fit = raw.errors.uniform_factor(tol) if raw.errors is not None else None
    if fit is not None and abs(fit[0] - 1) > 0.5 and fit[1] < 0.1:
        # one factor for the whole model: the step rescaled the gradients, no module is unstable
        c, r = fit
        where = "step_fn" if step.step_fn is not None else "loss_fn"
        details.update(factor=c, residual=r)
        return Finding(
            "mismatch",
            f"{raw.mode} gradients on {raw.device} are the float32 ones times {c:.2g}, one factor "
            f"for the whole model (whole-model error {verdict.grad_err:.1e}, what is left after "
            f"that factor {r:.1e}): the step rescales gradients, e.g. clips or reads them before "
            "scaler.unscale_(optimizer), unscales twice or never, or scales the loss by hand",
            "call scaler.unscale_(optimizer) once per step, after backward and before clipping or "
            "reading .grad",
            module=f"{where} (the training step)", device=raw.device, mode=raw.mode,
            related="DEV205" if raw.mode == "float16" else None, details=details)
    if raw.mode != "float32":
        try:
            unstable = probes.unstable_modules(step, raw.device, raw.mode, seed, k=tol.k,
                                               kernels=raw.kernels or "emulated")
        except Exception:  # noqa: BLE001 - the diagnosis is best effort
            unstable = []
        if unstable:
            label, e_low, e_round = unstable[0]
            module = label
            culprit = (f"; the first module whose output drifts is {label}: output error "
                       f"{e_low:.1e} under autocast vs {e_round:.1e} from rounding its inputs")
            details["unstable_modules"] = [list(u) for u in unstable]
        overflow = _hidden_overflow(step, raw, seed)
        if overflow is not None:  # an inf the step then hides (rsqrt(inf) = 0, clamp, where)
            culprit += overflow[1]
            module = module if unstable else overflow[0]
    loss = "" if verdict.loss_ok else f"; loss error {verdict.loss_err:.1e}"
    if not listed and verdict.missing:
        names = f"gradients present in only one of the runs: {', '.join(verdict.missing[:MAX_LISTED])}"
    return Finding(
        "mismatch",
        f"{raw.mode} gradients on {raw.device} are beyond what {raw.mode} reaches on this model "
        f"(whole-model error {verdict.grad_err:.1e}"
        + (f", noise floor {verdict.floor:.1e}, limit {listed[0][2]:.1e}"
           if verdict.floor is not None and listed else "")
        + f"); {names}{more}{loss}{culprit}",
        "run the named module in float32 (torch.autocast(..., enabled=False) around it, inputs "
        ".float()), or pass looser Tolerances",
        module=module, name=first, device=raw.device, mode=raw.mode, details=details)


def _hidden_overflow(step, raw: _Raw, seed: int) -> tuple[str, str] | None:
    """For a mismatching float16 run whose loss and gradients are finite: the first op that
    still made inf/NaN from finite inputs (the step hid it: ``x * rsqrt(inf)`` is 0), as
    ``(module, message part)``; None when there is none or the replay fails."""
    if raw.mode != "float16":
        return None
    try:
        nf = probes.nonfinite_probe(step, raw.device, DTYPES[raw.mode], seed, scale=raw.scale or 1.0,
                                    kernels=raw.kernels or "emulated")
    except Exception:  # noqa: BLE001 - the diagnosis is best effort
        return None
    if nf is None or not nf.inputs_finite:
        return None
    ins = ", ".join(f"{d} {s} in [{lo:.3g}, {hi:.3g}]" for d, s, lo, hi in nf.inputs) or "no float inputs"
    phase = "backward of " if nf.backward else ""
    return nf.module, (f"; {phase}{nf.op} in {nf.module} overflows float16 (max 65504) and the step "
                       f"hides the inf: output {nf.out_dtype}, inputs {ins}")


def _underflow_finding(step, raw: _Raw, ref: _Raw, tol: Tolerances) -> Finding | None:
    """Gradient elements lost to float16 underflow.

    With a GradScaler in use the loss is multiplied by the scale, so what underflows is
    estimated from the reference: elements non-zero in float32 but below float16's smallest
    subnormal (2**-24) in magnitude, and how many of them the scaled run keeps; this is
    information, not an error: the step already does what fixes underflow. Without a scaler (a custom
    step_fn that never calls ``scaler.scale``) the run's own zeros are counted, and a
    fraction above ``tol.underflow`` is an error.
    """
    total = sum(g.numel() for g in ref.grads.values() if g is not None)
    if not total or raw.errors is None:
        return None
    if not raw.scaler_used:
        lost = sum(p.zeros for p in raw.errors.params.values())
        kept, info = 0, False
    else:
        tiny = {n: int(torch.count_nonzero((g != 0) & (g.abs() < 2.0 ** -24)))
                for n, g in ref.grads.items() if g is not None}
        lost = sum(tiny.values())
        kept = lost - sum(min(raw.errors.params[n].zeros, m) for n, m in tiny.items() if n in raw.errors.params)
        info = True  # the step scales its loss: what float16 cannot hold is its range, not a bug
    frac = lost / total
    if frac <= tol.underflow:
        return None
    worst = max((n for n, g in ref.grads.items() if g is not None),
                key=lambda n: tiny[n] if raw.scaler_used
                else raw.errors.params.get(n).zeros if n in raw.errors.params else 0)
    if raw.scaler_used:
        msg = (f"{frac:.1%} of gradient elements ({lost} of {total}) are below float16's smallest "
               f"subnormal (2**-24) and would be zero without loss scaling; the GradScaler at scale "
               f"{raw.scale:g} keeps {kept} of them")
    else:
        msg = (f"{frac:.1%} of gradient elements ({lost} of {total}) are zero in the float16 run but "
               "non-zero in float32: the step does not scale the loss (scaler.scale(loss) is never called)")
    return Finding(
        "underflow", msg, "keep torch.amp.GradScaler with float16 (scaler.scale(loss).backward()), "
        "or autocast to bfloat16",
        module=_module_of(step.model, worst), name=worst, op="float16 backward", device=raw.device,
        mode="float16", related="DEV202",
        details={"fraction": frac, "lost": lost, "total": total, "kept_by_scaler": kept},
        severity="info" if info else "error")


def _deprecations(caught) -> list[Finding]:
    out, seen = [], set()
    for w in caught:
        if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
            continue
        if os.path.abspath(w.filename).startswith(_HERE):
            continue
        if "site-packages" in w.filename or "dist-packages" in w.filename:
            continue  # a library's own deprecations are not the user's to fix
        text = str(w.message).strip()
        if text in seen:
            continue
        seen.add(text)
        api = re.match(r"`?([\w.]+)\(", text)
        said = [p.strip().rstrip(".") for p in re.split(r"(?<=\.)\s+", text) if p.strip()]
        advice = [p for p in said if p.lower().startswith("please ")]
        what = "; ".join(p for p in said if p not in advice) or text
        fix = advice[0][len("please "):] if advice else "use the replacement the warning names"
        out.append(Finding(
            "deprecation",
            f"{os.path.basename(w.filename)}:{w.lineno} raised {w.category.__name__}: {what}", fix,
            op=api.group(1) if api else None, related="DEV206" if "amp" in text else None,
            details={"file": w.filename, "line": w.lineno}))
    return out


def _judge_run(step, raw: _Raw, ref: _Raw, tol: Tolerances, seed: int, cross_device: bool,
               bench=None) -> Verdict:
    """Judge a finished run; measure the noise floor first when the quick bound is exceeded."""
    if raw.mode == "float32":
        return judge(raw.errors, "float32", tol, adaptive=raw.adaptive,
                     fixed_rtol=tol.float32_rtol if (cross_device or step.step_fn) else 1e-5)
    if not needs_floor(raw.errors, raw.mode, tol):
        return judge(raw.errors, raw.mode, tol, adaptive=raw.adaptive)
    floor = _run(step, ref.device, "float32", seed, ref=ref, round_to=raw.mode, bench=bench)
    raw.floor_errors = floor.errors
    if floor.errors is None:
        return judge(raw.errors, raw.mode, tol, adaptive=raw.adaptive)
    verdict = judge(raw.errors, raw.mode, tol, floor=floor.errors, adaptive=raw.adaptive)
    if verdict.ok:
        return verdict
    # beyond k x the floor: is it what a perturbation k times the rounding also costs (kinks)?
    wide = _run(step, ref.device, "float32", seed, ref=ref, round_to=Rounding(raw.mode, tol.k),
                bench=bench)
    if wide.errors is None:
        return verdict
    verdict = judge(raw.errors, raw.mode, tol, floor=floor.errors, adaptive=raw.adaptive,
                    wide_floor=wide.errors)
    if verdict.ok:
        return verdict
    # one perturbation is one sample of how many kinks get crossed: a second, twice as wide
    # (measured: Reformer's LSH buckets failed the first at 4 of 25 seeds, by at most 1.31x)
    wide = _run(step, ref.device, "float32", seed, ref=ref, round_to=Rounding(raw.mode, 2 * tol.k),
                bench=bench)
    if wide.errors is None:
        return verdict
    return judge(raw.errors, raw.mode, tol, floor=floor.errors, adaptive=raw.adaptive,
                 wide_floor=wide.errors, wide_scale=2 * tol.k)


def _check(step, devices, modes, tolerances, seed, extra_warnings=(), world_size=None,
           target=None, cpu_kernels: str = "auto", policy: str = "cuda") -> Report:
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

        dist, dist_caught = for_check_step(step, devices, seed, world_size, target)
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
    report.findings.extend(_deprecations([*extra_warnings, *dist_caught, *caught]))
    for w in caught:
        if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    order = {d: i for i, d in enumerate(DEVICES)}
    morder = {m: i for i, m in enumerate(MODES)}
    report.runs.sort(key=lambda r: (order.get(r.device, 9), morder.get(r.mode, 9)))
    return report


def _check_into(report: Report, step, devices, modes, tols, seed, kernels: str = "emulated") -> None:
    mw = _master_weights(step)
    if mw:
        report.findings.append(mw)
    bench = _Bench(step.model)
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
            module=ref.module, device="cpu", mode="float32",
            details={"exit": ref.error_kind == "exit"}))
    report.runs.append(Run("cpu", "float32", "reference" if not broken else
                           ("error" if ref.error else "non-finite"), loss=ref.loss, error=ref.error))
    if ref.nonfinite:
        report.findings.append(_nonfinite_finding(step, ref, runs, seed))
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
        report.findings.append(_nonfinite_finding(step, raw, runs, seed))
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
        elif raw.error_kind == "exit":
            report.findings.append(Finding(
                "step-error", f"{raw.error} on {raw.device} {raw.mode}", "raise an exception instead "
                "of exiting", module=raw.module, device=raw.device, mode=raw.mode, details={"exit": True}))
        elif raw.mode != "float32" and _DTYPE_ERR.search(raw.error):
            report.findings.append(Finding(
                "step-error", f"the step raised {raw.error} on {raw.device} {raw.mode}: an op met "
                f"a float32 tensor and autocast's {raw.mode} output (the float32 run passes)",
                f"cast one operand to the other's dtype there (.to(x.dtype)), or run that code "
                "under torch.autocast(..., enabled=False) on .float() inputs",
                module=raw.module, device=raw.device, mode=raw.mode))
        else:
            report.findings.append(Finding(
                "step-error", f"the step raised {raw.error} on {raw.device} {raw.mode}",
                f"run the step on {raw.device} in {raw.mode} directly to see the traceback",
                module=raw.module, device=raw.device, mode=raw.mode))
        return run
    verdict = _judge_run(step, raw, ref, tol, seed, cross, bench)
    run.loss_err, run.grad_err, run.floor = verdict.loss_err, verdict.grad_err, verdict.floor
    run.update_err, run.how, run.excluded = verdict.update_err, verdict.how, verdict.excluded
    raw.ok = verdict.ok
    run.modules = by_module.module_rows(step.model, raw.errors, raw.floor_errors, tol, raw.mode,
                                        ref.grads if raw.mode == "float16" else None)
    if not verdict.ok:
        run.status = "mismatch"
        report.findings.append(_mismatch_finding(step, raw, verdict, seed, tol))
    if raw.mode == "float16":
        uf = _underflow_finding(step, raw, ref, tol)
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
