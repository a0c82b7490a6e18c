"""Dispatch-mode probes: device placement on a stand-in device, the first non-finite op.

Both probes run the user's ``loss_fn`` under a :class:`TorchDispatchMode` (which sees every
ATen op, forward and backward) and a :class:`ModuleTracker` (which says which module is
running), so a finding can name the op and the module.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map_only
from torch.utils.module_tracker import ModuleTracker
from torch.utils.weak import WeakIdKeyDictionary

from .report import Finding
from .step import TrainingStep, map_tensors

__all__ = ["module_label", "device_probe", "nonfinite_probe", "NonFinite"]

STAND_IN = "meta"
# Ops that legitimately take tensors on two devices (cross-device copies, CPU index tensors).
_CROSS_DEVICE_OK = {"aten.copy_.default", "aten._to_copy.default", "aten.index.Tensor"}


def _tensors(obj) -> list[torch.Tensor]:
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def module_label(model: torch.nn.Module, parents: set[str]) -> str:
    """Turn a ``ModuleTracker.parents`` set into a readable module path.

    ``{"Global", "Net", "Net.encoder.fc"}`` becomes ``"encoder.fc (Linear)"``; only
    ``{"Global"}`` means the code ran outside any module (``"loss_fn (outside the model)"``).
    """
    root = type(model).__name__
    names = [p for p in parents if p != "Global"]
    if not names:
        return "loss_fn (outside the model)"
    names.sort(key=lambda n: (n.count("."), n != root))
    name = names[-1]
    if "." in name:
        path = name.split(".", 1)[1]
        try:
            return f"{path} ({type(model.get_submodule(path)).__name__})"
        except AttributeError:
            return path
    if name == root:
        return f"{root} (the model itself)"
    return f"{name} (not a registered submodule of {root})"


def _unregistered_tensors(model: torch.nn.Module) -> dict[int, tuple]:
    """Tensors ``model.to(device)`` does not move: id -> (kind, dotted name, holder).

    kind is ``"attribute"`` (a plain tensor attribute, not a buffer) or ``"list"`` (a
    parameter or buffer of a layer held in a plain list, tuple or dict attribute; holder is
    that layer, ``"layers[0] (Linear)"``).
    """
    found: dict[int, tuple[str, str]] = {}
    for mname, mod in model.named_modules():
        prefix = f"{mname}." if mname else ""
        for attr, val in vars(mod).items():
            if attr in ("_parameters", "_buffers", "_modules"):
                continue
            if isinstance(val, torch.Tensor) and not isinstance(val, torch.nn.Parameter):
                found[id(val)] = ("attribute", prefix + attr, None)
                continue
            items = val.items() if isinstance(val, dict) else (
                enumerate(val) if isinstance(val, (list, tuple)) else ())
            for key, item in items:
                if not isinstance(item, torch.nn.Module):
                    continue
                label = f"{prefix}{attr}[{key!r}]" if isinstance(val, dict) else f"{prefix}{attr}[{key}]"
                for pname, t in list(item.named_parameters()) + list(item.named_buffers()):
                    found[id(t)] = ("list", f"{label}.{pname}", f"{label} ({type(item).__name__})")
    return found


@dataclass
class _Mix:
    op: str
    module: str
    key: tuple
    offender: torch.Tensor
    backward: bool


class _DeviceProbe(TorchDispatchMode):
    """Records every op whose tensor arguments sit on the stand-in device and elsewhere.

    0-dim CPU tensors are allowed next to any device, as CUDA allows them. After recording,
    the offending tensors are moved to the stand-in device so the step can go on and show
    every distinct problem, not just the first.
    """

    def __init__(self, tracker: ModuleTracker, model: torch.nn.Module):
        super().__init__()
        self.tracker = tracker
        self.model = model
        self.mixes: list[_Mix] = []
        self.made = WeakIdKeyDictionary()  # tensor off the stand-in -> its origin, see _remember

    def _off(self, t: torch.Tensor) -> bool:
        return t.device.type != STAND_IN and not (t.dim() == 0 and t.device.type == "cpu")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = _tensors((args, kwargs))
        on_target = any(t.device.type == STAND_IN for t in tensors)
        offenders = [t for t in tensors if self._off(t)]
        if on_target and offenders and str(func) not in _CROSS_DEVICE_OK:
            module = module_label(self.model, self.tracker.parents)
            for t in offenders:
                key = self.made.get(t) or ("id", id(t))
                self.mixes.append(_Mix(str(func), module, key, t, self.tracker.is_bw))
            args, kwargs = tree_map_only(
                torch.Tensor, lambda t: t.to(STAND_IN) if self._off(t) else t, (args, kwargs))
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if not on_target:
            try:
                self._remember(func, tensors, out)
            except Exception:  # bookkeeping must never break the user's step
                pass
        return out

    def _remember(self, func, tensors, out) -> None:
        """Record where each tensor off the stand-in device comes from.

        ``("made", op, module)``: a factory (an op with no such input) made it, or made the
        tensor it derives from; ``("id", id)``: it is, or derives from, a tensor that existed
        before the step (a parameter, attribute or captured tensor).
        """
        origin = next((self.made[t] for t in tensors if t in self.made), None)
        if origin is None:
            leaf = next((t for t in tensors if self._off(t)), None)
            if leaf is not None:
                origin = ("id", id(leaf))
            else:
                origin = ("made", str(func), module_label(self.model, self.tracker.parents))
        for o in _tensors(out):
            if self._off(o) and o not in self.made:
                self.made[o] = origin


_MISMATCH = 'on an accelerator this raises "Expected all tensors to be on the same device"'


def device_probe(step: TrainingStep) -> tuple[list[Finding], str | None]:
    """Replay forward and backward on the ``meta`` device and report device mixes.

    The model copy and the batch go to ``meta`` with ``.to("meta")``, as user code moves them
    to an accelerator. Whatever ``.to`` does not move stays on the CPU and shows up when it
    meets a ``meta`` tensor: a factory called without ``device=`` in ``forward``, a plain
    tensor attribute (not a buffer), the parameters of layers held in a Python list, a CPU
    tensor captured from outside the step. No real memory is used and no accelerator is
    needed.

    Returns:
        (findings, note): ``note`` says why the probe stopped early (some ops, such as
        ``.item()``, cannot run on ``meta``), or is ``None``.
    """
    note = None
    mixes: list[_Mix] = []
    unmoved: dict = {}
    try:
        model = copy.deepcopy(step.model).to(STAND_IN)
        batch = map_tensors(lambda t: t.to(STAND_IN), step.batch)
        unmoved = _unregistered_tensors(model)
        tracker = ModuleTracker()
        probe = _DeviceProbe(tracker, model)
        mixes = probe.mixes
        with tracker, probe:
            loss = step.loss_fn(model, batch)
            if not probe.mixes and isinstance(loss, torch.Tensor) and loss.requires_grad:
                loss.sum().backward()
    except Exception as exc:  # noqa: BLE001 - reported as a note, the real runs show errors
        if not mixes:
            first = (str(exc).strip().splitlines() or [""])[0]
            note = (f"device probe on {STAND_IN} stopped early ({type(exc).__name__}: {first}); "
                    "device placement is checked only up to that op")
    findings: list[Finding] = []
    seen: set = set()
    for mix in mixes:
        t = mix.offender
        kind, name, holder = (unmoved.get(mix.key[1], (None,) * 3) if mix.key[0] == "id"
                              else (None,) * 3)
        key = (kind, holder or name) if kind else mix.key
        if key in seen:
            continue
        seen.add(key)
        where = f"{mix.op} in {mix.module}" + (" (backward)" if mix.backward else "")
        shape = list(t.shape)
        if kind == "attribute":
            findings.append(Finding(
                "device-placement",
                f"tensor attribute {name} is a plain tensor, not a buffer: model.to(device) leaves "
                f"it on {t.device.type}, and {where} mixes it with the model's tensors; {_MISMATCH}",
                "register it in __init__ with self.register_buffer(...)",
                module=mix.module, name=name, op=mix.op, device=STAND_IN, related="DEV113"))
        elif kind == "list":
            container = name.split("[", 1)[0]
            findings.append(Finding(
                "device-placement",
                f"layer {holder} is held in the plain Python container {container}: "
                f"model.to(device) leaves its parameters on {t.device.type} and the optimizer never "
                f"sees them; {mix.op} mixes {name} with the model's tensors; {_MISMATCH}",
                f"hold the layers in nn.ModuleList (or nn.ModuleDict) instead of {container}",
                module=f"{holder}, in a plain container", name=name, op=mix.op, device=STAND_IN,
                related="DEV114"))
        elif mix.key[0] == "made":
            maker, maker_module = mix.key[1], mix.key[2]
            findings.append(Finding(
                "device-placement",
                f"{maker} in {maker_module} creates a tensor on {t.device.type} (no device=), "
                f"and {where} mixes it (shape {shape}) with the model's tensors; {_MISMATCH}",
                "pass device=x.device to the factory (or use a registered buffer)",
                module=maker_module, name=f"tensor of shape {shape} from {maker}", op=mix.op,
                device=STAND_IN, related="DEV112"))
        else:
            findings.append(Finding(
                "device-placement",
                f"a {t.device.type} tensor of shape {shape} that the step never moves (a global, a "
                f"closure, or a batch object devlint cannot walk) meets the model's tensors in "
                f"{where}; {_MISMATCH}",
                "move it with .to(device) where the model is moved, or make it a buffer",
                module=mix.module, name=f"tensor of shape {shape}", op=mix.op, device=STAND_IN))
    return findings, note


@dataclass
class NonFinite:
    """The first op whose floating-point output holds inf or NaN while its inputs are finite.

    ``inputs`` lists ``(dtype, shape, min, max)`` of each floating-point input (finite values).
    ``inputs_finite`` is False when the op already received inf/NaN (from the batch or a
    parameter), so no op created them.
    """

    op: str
    module: str
    out_dtype: str
    backward: bool
    inputs: list[tuple[str, list[int], float, float]] = field(default_factory=list)
    inputs_finite: bool = True


class _NonFiniteProbe(TorchDispatchMode):
    def __init__(self, tracker: ModuleTracker, model: torch.nn.Module):
        super().__init__()
        self.tracker = tracker
        self.model = model
        self.first: NonFinite | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.first is None:
            try:
                self._check(func, args, kwargs or {}, out)
            except Exception:  # the probe must never break the user's step
                pass
        return out

    def _check(self, func, args, kwargs, out) -> None:
        bad = [o for o in _tensors(out)
               if o.is_floating_point() and o.numel() and not bool(torch.isfinite(o).all())]
        if not bad:
            return
        ins = [t for t in _tensors((args, kwargs)) if t.is_floating_point() and t.numel()]
        ranges, finite = [], True
        for t in ins:
            ok = torch.isfinite(t)
            finite = finite and bool(ok.all())
            vals = t[ok].float()
            lo, hi = (float(vals.min()), float(vals.max())) if vals.numel() else (math.nan, math.nan)
            ranges.append((str(t.dtype).replace("torch.", ""), list(t.shape), lo, hi))
        self.first = NonFinite(str(func), module_label(self.model, self.tracker.parents),
                               str(bad[0].dtype).replace("torch.", ""), self.tracker.is_bw,
                               ranges, finite)


def nonfinite_probe(step: TrainingStep, device: str, dtype: torch.dtype, seed: int,
                    scale: float = 1.0) -> NonFinite | None:
    """Replay the step under autocast ``dtype`` on ``device`` and find the first non-finite op.

    Forward first; if the loss is finite, backward of ``loss * scale`` (``scale`` is the
    GradScaler scale, so gradient overflow shows where the scaled step overflowed).
    Returns ``None`` when nothing is non-finite. Exceptions from the step propagate.
    """
    model = copy.deepcopy(step.model).to(device)
    batch = map_tensors(lambda t: t.to(device), step.batch)
    tracker = ModuleTracker()
    probe = _NonFiniteProbe(tracker, model)
    torch.manual_seed(seed)
    with tracker, probe:
        with torch.autocast(device_type=device, dtype=dtype, enabled=dtype != torch.float32):
            loss = step.loss_fn(model, batch)
        if probe.first is None and loss.requires_grad:
            (loss.float().sum() * scale).backward()
    return probe.first
