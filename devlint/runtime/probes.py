"""Diagnostic replays, run only to explain a failure: the first non-finite op, and the module
that is numerically unstable in a low precision.

Both replay the step on a fresh copy of the model. Module names in backward come from the
autograd graph: every node created while a module's forward ran is labelled with that module
(innermost first), and in backward ``torch._C._current_autograd_node()`` says which node runs.
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.module_tracker import ModuleTracker

from . import autocast_policy, emulate
from .compare import DTYPES, rel_l2, round_trip, unit_roundoff
from .names import running_function
from .own_autocast import cuda_on_cpu
from .standin import Tracker, module_label
from .step import TrainingStep, map_tensors, seed_host

__all__ = ["NonFinite", "nonfinite_probe", "unstable_modules", "module_label", "function_module"]

_aten = torch.ops.aten
#: Ops whose output is uninitialised memory: never "non-finite" by computation.
EMPTY_FAMILY = {_aten.empty.memory_format, _aten.empty_like.default, _aten.new_empty.default,
                _aten.empty_strided.default, _aten.new_empty_strided.default,
                _aten.empty_permuted.default, _aten.resize_.default}
#: Copies a composite op makes of an operand before its kernel (``matmul``: ``expand``, then
#: ``clone``/``_unsafe_view`` to a batch of matrices for ``bmm``); views are told by ``is_view``.
_RESHAPES = {_aten.clone.default, _aten._unsafe_view.default, _aten.contiguous.default, _aten.reshape.default}


def _tensors(obj) -> list[torch.Tensor]:
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


class _NodeLabels:
    """Labels autograd nodes with the module whose forward created them."""

    def __init__(self, model: torch.nn.Module):
        self.labels: dict = {}
        self.handles = []
        names = {m: n for n, m in model.named_modules()}
        root = type(model).__name__
        for mod, name in names.items():
            label = (f"{name} ({type(mod).__name__})" if name else f"{root} (the model itself)")
            self.handles.append(mod.register_forward_hook(self._hook(label)))

    def _hook(self, label):
        def hook(_mod, _inputs, output):
            stack = [t.grad_fn for t in _tensors(output) if t.grad_fn is not None]
            seen = 0
            while stack and seen < 100_000:
                node = stack.pop()
                seen += 1
                if node is None or node in self.labels:
                    continue
                self.labels[node] = label
                stack.extend(n for n, _ in node.next_functions if n is not None)
        return hook

    def current(self) -> str | None:
        node = torch._C._current_autograd_node()
        return self.labels.get(node) if node is not None else None

    def remove(self):
        for h in self.handles:
            h.remove()


@dataclass
class NonFinite:
    """The first op whose floating-point output holds inf or NaN while its inputs are finite.

    ``inputs`` lists ``(dtype, shape, min, max)`` of each floating-point input (finite values).
    ``inputs_finite`` is False when the op already received inf/NaN (from the batch or a
    parameter), so no op created them. ``module`` is the module running it (in backward: the
    module whose forward created the autograd node). ``in_place``: the op overwrote one of its
    inputs (``h.mul_(1e5)``); ``inputs`` are read before it ran. ``function``: the custom
    ``torch.autograd.Function`` method it ran in (``"Cube.forward"``), if any. ``feeds``: for
    a cast (``aten._to_copy``, autocast's cast of a float32 operand to float16 included), the
    next op that took its non-finite output (``"aten.bmm.default"``), which the step wrote.
    """

    op: str
    module: str
    out_dtype: str
    backward: bool
    inputs: list[tuple[str, list[int], float, float]] = field(default_factory=list)
    inputs_finite: bool = True
    in_place: bool = False
    function: str | None = None  # the custom autograd Function method running it ("Cube.forward")
    feeds: str | None = None  # the op a cast's non-finite output went to ("aten.bmm.default")


class _NonFiniteProbe(TorchDispatchMode):
    def __init__(self, tracker: ModuleTracker, labels: _NodeLabels, model: torch.nn.Module):
        super().__init__()
        self.tracker = tracker
        self.labels = labels
        self.model = model
        self.first: NonFinite | None = None
        self.in_backward = False
        self.prev: tuple | None = None  # the last op's (args, kwargs, output)
        self.cast: list | None = None  # a first non-finite cast's outputs, until an op takes one
        self.watch = 0  # ops left to look for that op

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        ranges = None
        if self.first is None and func._schema.is_mutable:
            try:  # an in-place op overwrites its input: read the inputs before it runs
                ranges = _ranges(args, kwargs or {})
            except Exception:  # the probe must never break the user's step
                pass
        out = func(*args, **(kwargs or {}))
        if self.cast is not None:
            self._fed(func, args, kwargs or {}, out)
        if self.first is None and func not in EMPTY_FAMILY:
            try:
                self._check(func, args, kwargs or {}, out, ranges)
            except Exception:  # the probe must never break the user's step
                pass
            self.prev = (args, kwargs or {}, out)
        return out

    def _fed(self, func, args, kwargs, out) -> None:
        """Name the op that takes the first non-finite cast's output (autocast casts an op's
        operands just before the op), through the views and copies a composite op such as
        ``matmul`` makes of it first (``expand``, ``_unsafe_view``, ``clone``), looking at a few
        ops after the cast only."""
        self.watch -= 1
        if any(t is c for t in _tensors((args, kwargs)) for c in self.cast):
            if func.is_view or func in _RESHAPES:
                self.cast = _tensors(out)
                return
            self.first.feeds = str(func)
        if self.first.feeds is not None or self.watch <= 0:
            self.cast = None

    def _widened(self, func, args, kwargs):
        """``(op, its inputs' ranges)`` when ``func`` rounds to the low dtype what a rule
        computed in float32 for that op (:func:`autocast_policy.widened`): on a GPU the op
        outputs the low dtype itself, so the overflow is the op's. The inputs are the op's
        (rounded to the low dtype before the float32 computation: said in that dtype); None
        otherwise."""
        if func is not _aten._to_copy.default or not args:
            return None
        op = autocast_policy.widened(args[0])
        if op is None:
            return None
        low = str(kwargs.get("dtype", args[0].dtype)).replace("torch.", "")
        ranges = None
        if self.prev is not None and any(o is args[0] for o in _tensors(self.prev[2])):
            ranges = _ranges(*self.prev[:2])
            if ranges is not None:
                ranges = [(low if d == "float32" else d, s, lo, hi) for d, s, lo, hi in ranges]
        return op, ranges

    def _check(self, func, args, kwargs, out, ranges=None) -> None:
        bad = [o for o in _tensors(out)
               if o.is_floating_point() and o.numel() and not bool(torch.isfinite(o).all())]
        if not bad:
            return
        flat = tree_flatten((args, kwargs))[0]
        if any(isinstance(a, float) and not math.isfinite(a) for a in flat):
            return  # a deliberate -inf (masked_fill(mask, -inf), torch.full(..., -inf))
        ranges = _ranges(args, kwargs) if ranges is None else ranges
        if ranges is None:
            return  # inf/NaN handed on from an earlier op: not where it starts
        module = (self.labels.current() if self.in_backward else None) or \
            module_label(self.model, self.tracker.parents)
        name = str(func)
        wide = self._widened(func, args, kwargs)
        if wide is not None:  # the rounding of an op computed in float32 here: the op's output
            name, ranges = wide[0], wide[1] or ranges
        self.first = NonFinite(name, module, str(bad[0].dtype).replace("torch.", ""),
                               self.in_backward, ranges, True, func._schema.is_mutable,
                               running_function(sys._getframe()))
        if func is _aten._to_copy.default and wide is None:
            self.cast, self.watch = bad, 8


def _ranges(args, kwargs) -> list | None:
    """``(dtype, shape, min, max)`` of each floating-point input of an op, or None when one
    already holds inf/NaN."""
    out = []
    for t in _tensors((args, kwargs)):
        if not (t.is_floating_point() and t.numel()):
            continue
        if not bool(torch.isfinite(t).all()):
            return None
        vals = t.detach().float()
        out.append((str(t.dtype).replace("torch.", ""), list(t.shape), float(vals.min()), float(vals.max())))
    return out


def nonfinite_probe(step: TrainingStep, device: str, dtype: torch.dtype, seed: int,
                    scale: float = 1.0, kernels: str = "emulated") -> NonFinite | None:
    """Replay the step under autocast ``dtype`` on ``device`` and find the first non-finite op.

    Forward first; if the loss is finite, backward of ``loss * scale`` (``scale`` is the
    GradScaler scale, so gradient overflow shows where the scaled step overflowed). Regions
    ``loss_fn`` opens for ``"cuda"`` are the CPU's, as in the runs
    (:func:`devlint.runtime.own_autocast.cuda_on_cpu`). Outputs of
    ``empty``-family ops (uninitialised memory) are ignored. ``kernels`` as in
    :func:`devlint.runtime.emulate.cpu_kernels` (the probe sees the emulated GEMM's rounded
    output, so an overflow there is named as in the native kernel). Returns ``None`` when
    nothing is non-finite. Exceptions from the step propagate.
    """
    model = copy.deepcopy(step.model).to(device)
    if dtype == torch.float32:
        model.float()
    batch = map_tensors(lambda t: t.to(device), step.batch)
    tracker = Tracker()
    labels = _NodeLabels(model)
    probe = _NonFiniteProbe(tracker, labels, model)
    for name, t in [*model.named_parameters(), *(("batch", b) for b in _tensors(batch))]:
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return NonFinite("(input)", name, str(t.dtype).replace("torch.", ""), False, [], False)
    torch.manual_seed(seed)
    seed_host(seed)
    own = cuda_on_cpu(scale / 2.0 ** 16) if device == "cpu" and autocast_policy.current() == "cuda" \
        else contextlib.nullcontext()
    try:
        with emulate.cpu_kernels(device, dtype, kernels, model), tracker, probe, own:
            with torch.autocast(device_type=device, dtype=dtype, enabled=dtype != torch.float32):
                loss = step.loss_fn(model, batch)
            if probe.first is None and loss.requires_grad:
                probe.in_backward = True
                (loss.float().sum() * scale).backward()
    finally:
        labels.remove()
    return probe.first


def function_module(step: TrainingStep, node_name: str, seed: int) -> tuple[str, type] | None:
    """Where the custom ``torch.autograd.Function`` whose autograd node class is ``node_name``
    (``"ScaleBackward"`` for ``Scale``) is applied: ``(module label, the Function class)``, the
    label ``"path (Class)"`` of the module whose forward applied it, or ``"loss_fn (outside
    the model)"``. Found by replaying the forward in float32 on the CPU with every autograd
    node labelled by its module; None when the replay never applies it. Exceptions from the
    step propagate."""
    model = copy.deepcopy(step.model).float()
    batch = map_tensors(lambda t: t.to("cpu"), step.batch)
    labels = _NodeLabels(model)
    torch.manual_seed(seed)
    seed_host(seed)
    try:
        out = step.loss_fn(model, batch)
    finally:
        labels.remove()
    stack, seen = [t.grad_fn for t in _tensors(out) if t.grad_fn is not None], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__ == node_name and hasattr(node, "_forward_cls"):
            return labels.labels.get(node, "loss_fn (outside the model)"), node._forward_cls
        stack.extend(n for n, _ in node.next_functions)
    return None


def _rel_err(a, b) -> float:
    xs = [t for t in _tensors(a) if t.is_floating_point()]
    ys = [t for t in _tensors(b) if t.is_floating_point()]
    if len(xs) != len(ys) or not xs:
        return 0.0
    num = den = 0.0
    for x, y in zip(xs, ys):
        if x.shape != y.shape:
            return 0.0
        x, y = x.detach().double(), y.detach().double()
        if not bool(torch.isfinite(x).all()):
            return math.inf
        num += float((x - y).pow(2).sum())
        den += float(y.pow(2).sum())
    return rel_l2(math.sqrt(num), math.sqrt(den))


def _hooks_off(model: torch.nn.Module) -> list:
    """Detach every forward (pre-)hook of the model's modules; returns what
    :func:`_hooks_on` puts back. transformers 5 records hidden states and attentions with
    forward hooks (``output_capturing``): a module replayed under autocast would append its
    float16 outputs to the model's own collected outputs."""
    saved = []
    for mod in model.modules():
        saved.append((mod, mod._forward_hooks, mod._forward_pre_hooks))
        mod._forward_hooks, mod._forward_pre_hooks = type(mod._forward_hooks)(), type(mod._forward_pre_hooks)()
    return saved


def _hooks_on(saved: list) -> None:
    for mod, post, pre in saved:
        mod._forward_hooks, mod._forward_pre_hooks = post, pre


def unstable_modules(step: TrainingStep, device: str, mode: str, seed: int, k: float = 24.0,
                     kernels: str = "emulated"):
    """Find the innermost modules whose output under autocast drifts far beyond rounding.

    Replays the forward in float32 (no grad). At every module call, the module is run again
    on the same inputs (a) cast to the mode's dtype (as a previous autocast op hands them
    on), under ``torch.autocast(mode)``, and (b) in float32 on inputs rounded to the mode's
    dtype, with the RNG state of the original call (same dropout). A module is
    unstable when its autocast output error (relative L2 against float32) exceeds
    ``k * max(error of (b), u)`` and ``32 u`` (``u`` the unit roundoff): the error comes from
    computing in the low precision, not from representing the inputs. ``kernels`` as in
    :func:`devlint.runtime.emulate.cpu_kernels`, for (a). Returns
    ``[(module label, autocast error, rounding error)]``, innermost modules only, in call
    order; exceptions propagate.
    """
    dtype = DTYPES[mode]
    u = unit_roundoff(mode)
    model = copy.deepcopy(step.model).to(device).float()
    batch = map_tensors(lambda t: t.to(device), step.batch)
    names = {m: n for n, m in model.named_modules()}
    worst: dict[str, tuple[float, float]] = {}
    order: list[str] = []
    busy = [False]
    states: dict[int, list] = {}
    handles = []
    cuda = device == "cuda"

    def rng():
        return (torch.get_rng_state(), torch.cuda.get_rng_state() if cuda else None)

    def set_rng(s):
        torch.set_rng_state(s[0])
        if cuda:
            torch.cuda.set_rng_state(s[1])

    def pre(mod, args, kwargs):
        if not busy[0]:
            states.setdefault(id(mod), []).append(rng())

    def post(mod, args, kwargs, output):
        if busy[0] or not states.get(id(mod)):
            return
        before = states[id(mod)].pop()
        after = rng()
        busy[0] = True
        saved = _hooks_off(model)  # the replays must not feed other hooks (HF output capture)
        try:
            set_rng(before)
            largs = map_tensors(lambda t: t.to(dtype) if t.is_floating_point() else t, (args, kwargs))
            with emulate.cpu_kernels(device, dtype, kernels, mod), torch.autocast(device_type=device, dtype=dtype):
                low = mod(*largs[0], **largs[1])
            set_rng(before)
            rargs = map_tensors(lambda t: round_trip(t, mode), (args, kwargs))
            rounded = mod(*rargs[0], **rargs[1])
        except Exception:  # a module that cannot run alone is not judged
            return
        finally:
            _hooks_on(saved)
            set_rng(after)
            busy[0] = False
        e_low, e_round = _rel_err(low, output), _rel_err(rounded, output)
        label = names.get(mod, "")
        label = f"{label} ({type(mod).__name__})" if label else f"{type(mod).__name__} (the model itself)"
        if label not in worst:
            order.append(label)
            worst[label] = (e_low, e_round)
        elif e_low > worst[label][0]:
            worst[label] = (e_low, e_round)

    for mod in names:
        handles.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(mod.register_forward_hook(post, with_kwargs=True))
    torch.manual_seed(seed)
    seed_host(seed)
    try:
        with torch.no_grad():
            step.loss_fn(model, batch)
    finally:
        for h in handles:
            h.remove()
    bad = [lab for lab in order
           if worst[lab][0] > max(k * max(worst[lab][1], u), 32 * u)]
    paths = [lab.split(" (", 1)[0] for lab in bad]
    inner = [lab for lab, p in zip(bad, paths)
             if not any(q != p and (q.startswith(p + ".") or (p == "" and q)) for q in paths)
             and not lab.endswith("(the model itself)")]
    return [(lab, *worst[lab]) for lab in inner]
