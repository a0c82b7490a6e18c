"""Where the operand of another dtype came from, when a low-precision run raises a dtype error.

Under autocast most ops cast their inputs, but some do not and require equal dtypes:
``index_put_`` (``out[mask] = y``), ``index_add_``, ``scatter_``, ``masked_scatter_``, an
in-place op whose result type cannot be its own. The step then raises "Index put requires the
source and destination dtypes match, got Half for the destination and Float for the source",
and the traceback names the line, not why one operand is float32. A frequent why: a custom
``torch.autograd.Function`` whose ``forward`` returns float32 whatever its input's dtype (it
computes in ``x.float()`` and never casts back).

:func:`dtype_error_origin` replays ``loss_fn`` under autocast in the failing run's dtype,
notes the output of every custom Function applied (its class, and the dtypes in and out), and
when an op raises, returns the op and, for each floating operand a Function returned in
another dtype than its floating inputs, that Function. It also returns the outermost torch
function the step called that raised (``api``, e.g. ``torch.linalg.solve``): some refuse a dtype
before any ATen op runs (``torch.quantile`` takes float32/float64 only), and that one is then
the ``op``.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._python_dispatch import TorchDispatchMode

from . import autocast_policy, emulate
from .own_autocast import cuda_on_cpu
from .probes import _tensors
from .standin import Tracker, module_label
from .step import TrainingStep, map_tensors, seed_host

__all__ = ["DtypeOrigin", "dtype_error_origin"]


@dataclass
class DtypeOrigin:
    """The op that raised (``"aten.index_put_.default"``) and the module running it; with
    ``function`` (the custom Function's qualified name), ``dtype_in`` and ``dtype_out`` when one
    of its operands was a Function's output of another dtype than that Function's input."""

    op: str
    module: str
    function: str | None = None
    dtype_in: str | None = None
    dtype_out: str | None = None
    api: str | None = None


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


class _Watch(TorchDispatchMode):
    def __init__(self, tracker, model, made: dict):
        super().__init__()
        self.tracker, self.model, self.made = tracker, model, made
        self.found: DtypeOrigin | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            if self.found is None:
                self.found = DtypeOrigin(str(func), module_label(self.model, self.tracker.parents))
                for t in _tensors((args, kwargs)):
                    got = self.made.get(id(t))
                    if got is not None and got[0] is t:
                        _, cls, dtype_in, dtype_out = got
                        self.found.function, self.found.dtype_in, self.found.dtype_out = cls, dtype_in, dtype_out
                        break
            raise


class _WatchCalls(TorchFunctionMode):
    """Notes the outermost torch function that raised (the mode is off inside its own handler,
    so nested calls are not seen); when no ATen op raised under it, that function is the op."""

    def __init__(self, watch: _Watch):
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            name = resolve_name(func) or getattr(func, "__qualname__", None) or str(func)
            if self.watch.found is None:
                self.watch.found = DtypeOrigin(name, module_label(self.watch.model, self.watch.tracker.parents))
            if self.watch.found.api is None:
                self.watch.found.api = name
            raise


@contextlib.contextmanager
def _functions_noted(made: dict):
    """While active, ``torch.autograd.Function.apply`` notes in ``made`` (id -> (tensor,
    qualname, dtype in, dtype out)) each floating output whose dtype differs from the dtype
    of the Function's floating tensor inputs (all of one dtype)."""
    fn = torch.autograd.function.Function
    real = fn.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        out = real.__func__(cls, *args, **kwargs)
        ins = {t.dtype for t in _tensors((args, kwargs)) if t.is_floating_point()}
        if len(ins) == 1:
            (dtype_in,) = ins
            for t in _tensors(out):
                if t.is_floating_point() and t.dtype != dtype_in:
                    made[id(t)] = (t, cls.__qualname__, _name(dtype_in), _name(t.dtype))
        return out

    fn.apply = classmethod(apply)
    try:
        yield
    finally:
        fn.apply = real


def dtype_error_origin(step: TrainingStep, device: str, dtype: torch.dtype, seed: int,
                       kernels: str = "emulated") -> DtypeOrigin | None:
    """Replay ``step.loss_fn`` on a fresh model copy on ``device`` under autocast ``dtype`` and
    return the op that raised, with the custom Function that made an operand of another dtype
    (see the module docstring); None when the replay does not raise. Never raises."""
    try:
        model = copy.deepcopy(step.model).to(device)
        batch = map_tensors(lambda t: t.to(device), step.batch)
        tracker, made = Tracker(), {}
        watch = _Watch(tracker, model, made)
        torch.manual_seed(seed)
        seed_host(seed)
        own = cuda_on_cpu() if device == "cpu" and autocast_policy.current() == "cuda" else contextlib.nullcontext()
        with emulate.cpu_kernels(device, dtype, kernels, model), tracker, _functions_noted(made), watch, \
                _WatchCalls(watch), own:
            with torch.autocast(device_type=device, dtype=dtype):
                step.loss_fn(model, batch)
    except Exception:  # noqa: BLE001 - the diagnosis is best effort; the raise is what it looks for
        return watch.found if "watch" in locals() else None
    return None
