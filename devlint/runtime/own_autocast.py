"""Autocast regions a step opens itself, in runs that devlint does not wrap in its own autocast.

The distributed check's runs (every DDP/FSDP rank and the one-process runs it is compared
with) are float32 runs of the step; a ``step_fn`` written as in training opens its own
region, ``torch.autocast(device_type=x.device.type, dtype=torch.float16)``. On a CPU rank that
region is CPU autocast, whose casting rules are not a GPU's (see
:mod:`devlint.runtime.autocast_policy`): ``torch.mv`` of an autocast output and a float32
parameter raises there and runs on a GPU. While :class:`OwnAutocast` is active, a CPU
autocast region follows the same rules and computes its bfloat16/float16 GEMMs and
convolutions with the same kernels as the single-process check's low-precision runs (CUDA's
rules and the ``cpu_kernels`` choice, :mod:`devlint.runtime.emulate`), and the dtype of every
enabled region of the run's device is recorded, so that each row says which rules applied.

A step written for a GPU names CUDA itself: ``torch.autocast("cuda")``,
``torch.autocast(device_type="cuda", dtype=...)``, ``torch.cuda.amp.autocast()``,
``torch.amp.GradScaler("cuda")``, ``torch.cuda.amp.GradScaler()``. On a machine without CUDA,
torch disables each of these with a warning, so the CPU runs that stand in for the GPU would
run that step in float32 and unscaled. :func:`cuda_on_cpu` makes them the CPU's instead, as
the GPU would run them: the same dtype (CUDA's default, float16, when none is given), enabled
flag and scaler settings; the CPU autocast region then follows the rules in force (CUDA's,
:mod:`devlint.runtime.autocast_policy`). It is active in every CPU run that stands in for CUDA:
the single-process check's runs (:func:`devlint.runtime.replay.run_once`) and, through
:class:`OwnAutocast`, the distributed check's CPU runs.
"""

from __future__ import annotations

import contextlib
import sys
import weakref

import torch

from . import autocast_policy, autocast_requests, emulate

__all__ = ["OwnAutocast", "cuda_on_cpu"]


#: The scalers made inside a :func:`cuda_on_cpu` block, while they live.
_MADE_IN_RUNS: weakref.WeakSet = weakref.WeakSet()


class _Made(list):
    """The scalers :func:`cuda_on_cpu` made the CPU's; ``new``: those constructed in its block;
    ``disabled``: the disabled scalers whose ``scale`` was called in it (``enabled=False``: the
    loss passes unscaled)."""

    def __init__(self):
        super().__init__()
        self.new: list = []
        self.disabled: list = []


@contextlib.contextmanager
def cuda_on_cpu(scale: float = 1.0, dtypes: set | None = None):
    """While the block runs, ``torch.autocast`` regions and ``torch.amp.GradScaler`` objects made
    for ``"cuda"`` (also by ``torch.cuda.amp``) are made for ``"cpu"``: a region keeps its
    dtype (float16, CUDA's default, when none is given), ``enabled`` and ``cache_enabled``; a
    scaler keeps its settings, its ``init_scale`` multiplied by ``scale`` (the run's loss
    scale against GradScaler's default, so a run that settles the scale settles the step's
    own scaler too). A ``"cuda"`` region made before the block (a decorator applied at import,
    a region a module keeps), which torch disabled here, opens the CPU's region it was asked
    to be while it is entered (:func:`devlint.runtime.autocast_requests.asked_enabled`):
    enabled in its dtype, as on the GPU, or off, what ``@torch.autocast("cuda",
    enabled=False)`` is for; off when nothing tells (float32 inside: a check that misses,
    never a false alarm). A ``GradScaler("cuda")`` made before the block, which torch disabled,
    is the CPU scaler it was asked to be from its first ``scale`` in the block (its settings as
    :func:`devlint.runtime.autocast_requests.asked_scaler` kept them, ``init_scale`` times
    ``scale``), and is restored on exit; so is one the step made in an earlier block and
    kept (on its first call, in a global or on the model): each run is the training's first
    step, where it is new. A Function whose
    forward is decorated ``@torch.amp.custom_fwd(device_type="cuda", ...)`` sees the CPU's
    autocast as CUDA's while it runs (``torch.is_autocast_enabled("cuda")``,
    ``torch.get_autocast_dtype("cuda")``, its ``cast_inputs``). Yields the list of the
    enabled scalers made (CPU ``torch.amp.GradScaler``), in order, whose ``new`` lists those
    constructed in the block (not made before it and converted) and ``disabled`` the
    disabled ones whose ``scale`` was called (as asked, ``enabled=False``, or left disabled); ``dtypes``, if given,
    collects the dtype (``"float16"``) of every enabled region made for ``"cuda"``."""
    region, scaler, amp = torch.amp.autocast_mode.autocast, torch.amp.GradScaler, torch.amp.autocast_mode
    real_region, real_scaler = region.__init__, scaler.__init__
    real_enabled, real_dtype, real_cast = torch.is_autocast_enabled, torch.get_autocast_dtype, amp._cast
    made = _Made()

    # @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32) asks these about
    # "cuda" when the Function runs, and casts the "cuda" tensors: here, the CPU's
    def is_enabled(device_type=None):
        return real_enabled("cpu" if device_type in (None, "cuda") else device_type)

    def get_dtype(device_type):
        return real_dtype("cpu" if device_type == "cuda" else device_type)

    def cast(value, device_type, dtype):
        return real_cast(value, "cpu" if device_type == "cuda" else device_type, dtype)

    def region_init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type == "cuda":
            device_type = "cpu"
            dtype = torch.float16 if dtype is None else dtype  # torch.get_autocast_dtype("cuda")'s default
            if dtypes is not None and enabled:
                dtypes.add(str(dtype).removeprefix("torch."))
        real_region(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    def scaler_init(self, device="cuda", init_scale=2.0 ** 16, *args, **kwargs):
        if device == "cuda":
            device, init_scale = "cpu", init_scale * scale
        real_scaler(self, device, init_scale, *args, **kwargs)
        if device == "cpu" and self.is_enabled():
            made.append(self)
            made.new.append(self)
            _MADE_IN_RUNS.add(self)

    real_enter, real_exit = region.__enter__, region.__exit__

    def enter(self):
        # a "cuda" region made before the block (a decorator applied at import, a region a
        # module keeps): torch disabled it here. It opens the CPU's region it was asked to be:
        # enabled in its dtype, as the GPU runs it, or off (what @torch.autocast("cuda",
        # enabled=False) around numerically delicate code is for); off when nothing says
        if self.device == "cuda":
            asked = autocast_requests.asked_enabled(self, sys._getframe(1))
            cpu = region.__new__(region)
            real_region(cpu, "cpu", dtype=self.fast_dtype, enabled=bool(asked))
            if asked and dtypes is not None:
                dtypes.add(str(self.fast_dtype).removeprefix("torch."))
            self.__dict__.setdefault("_devlint_cpu", []).append(cpu)
            real_enter(cpu)
        return real_enter(self)

    def exit_(self, *exc):
        out = real_exit(self, *exc)
        inner = self.__dict__.get("_devlint_cpu")
        if inner:
            real_exit(inner.pop(), *exc)
        return out

    real_scale = scaler.scale
    converted: list = []

    def scale_(self, outputs):
        # a GradScaler("cuda") made before the block (at import, by a training script):
        # torch disabled it; for this block it is the CPU scaler it was asked to be
        asked = autocast_requests.asked_scaler(self)
        disabled = getattr(self, "_device", None) == "cuda" and not self._enabled
        # one the step made in an earlier run and kept (made on its first call, held by a
        # global, a trainer, the model): each run is that first step again, so it starts as made
        kept = self in _MADE_IN_RUNS and all(s is not self for s in made.new) \
            and all(o is not self for o, _ in converted)
        if (disabled or kept) and asked and asked["enabled"]:
            saved = dict(self.__dict__)
            init = asked["init_scale"] * (scale if asked["device"] == "cuda" else 1.0)
            real_scaler(self, "cpu", init, asked["growth_factor"],
                        asked["backoff_factor"], asked["growth_interval"], True)
            converted.append((self, saved))
            made.append(self)
        if not self._enabled and all(s is not self for s in made.disabled):
            made.disabled.append(self)
        return real_scale(self, outputs)

    region.__init__, scaler.__init__, scaler.scale = region_init, scaler_init, scale_
    region.__enter__, region.__exit__ = enter, exit_
    torch.is_autocast_enabled, torch.get_autocast_dtype, amp._cast = is_enabled, get_dtype, cast
    try:
        yield made
    finally:
        region.__init__, scaler.__init__, scaler.scale = real_region, real_scaler, real_scale
        region.__enter__, region.__exit__ = real_enter, real_exit
        torch.is_autocast_enabled, torch.get_autocast_dtype, amp._cast = real_enabled, real_dtype, real_cast
        for obj, saved in converted:  # as the step's author left it, for the next run
            obj.__dict__.clear()
            obj.__dict__.update(saved)


class OwnAutocast:
    """A reusable context manager for the runs on ``device`` (``"cpu"`` or ``"cuda"``): on the
    CPU, CPU autocast regions follow ``policy`` (one of
    :data:`devlint.runtime.autocast_policy.POLICIES`) and low-precision GEMMs/convolutions run
    as ``kernels`` says (``"emulated"`` or ``"native"``, already resolved from ``"auto"``;
    ``model`` picks the emulation, :func:`devlint.runtime.emulate.cpu_kernels`). On CUDA
    nothing changes (the GPU's own autocast). ``dtypes`` collects ``"bfloat16"``/``"float16"``
    for every enabled ``torch.autocast`` region of ``device`` opened while it is active (one
    process; ``torch.autocast.__enter__`` is wrapped for that time). Under CUDA's rules on the
    CPU, the step's regions and scalers made for ``"cuda"`` are made for the CPU
    (:func:`cuda_on_cpu`).

    Raises:
        ValueError: an unknown ``policy`` or ``kernels`` value (on entry).
    """

    def __init__(self, device: str, policy: str = "cuda", kernels: str = "native", model=None):
        self.device, self.policy, self.kernels, self.model = device, policy, kernels, model
        self.dtypes: set[str] = set()
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> OwnAutocast:
        stack = contextlib.ExitStack()
        if self.device == "cpu":
            stack.enter_context(autocast_policy.policy(self.policy))
            # the step picks the dtype: either emulation acts per op on bfloat16 and float16 alike
            stack.enter_context(emulate.cpu_kernels("cpu", torch.bfloat16, self.kernels, self.model))
            if self.policy == "cuda":  # the CPU stands in for CUDA: the step's "cuda" regions are its own
                stack.enter_context(cuda_on_cpu())
        cls = torch.amp.autocast_mode.autocast
        real, seen, device = cls.__enter__, self.dtypes, self.device

        def enter(region):
            out = real(region)
            if getattr(region, "_enabled", False) and region.device == device:
                seen.add(str(region.fast_dtype).removeprefix("torch."))
            return out

        cls.__enter__ = enter
        stack.callback(setattr, cls, "__enter__", real)
        self._stack = stack
        return self

    def __exit__(self, *exc) -> bool:
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        return False

    def label(self, dtypes=None) -> tuple[str | None, str | None]:
        """``(Run.policy, Run.kernels)`` for a row whose run opened the regions ``dtypes``
        (default: those seen here): ``(None, None)`` when it opened none; on the CPU the policy
        and the kernels; on CUDA ``("cuda", None)``."""
        dtypes = self.dtypes if dtypes is None else dtypes
        if not dtypes:
            return None, None
        return (self.policy, self.kernels) if self.device == "cpu" else (self.device, None)
