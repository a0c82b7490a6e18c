"""Low-precision GEMMs and convolutions on the CPU, computed the way a GPU computes them.

On a CPU without native bfloat16/float16 matrix units (no AVX512-BF16, AMX or AVX512-FP16),
PyTorch's bfloat16 and float16 GEMMs and convolutions are many times slower than float32
(measured on an AVX2 EPYC: a 1024x256 @ 256x1024 matmul takes 14 ms in float32, 469 ms in
bfloat16, 555 ms in float16), so a check's low-precision runs would cost 8-13 plain steps
each. :class:`Float32Accumulate` replaces those kernels, for bfloat16/float16 operands on the
CPU only, with the arithmetic of a GPU tensor-core GEMM: the (already rounded) low-precision
operands are widened to float32 exactly, products are accumulated in float32, and the result
is rounded once to the operands' dtype. That is cuBLAS's ``CUBLAS_COMPUTE_32F`` compute type,
which PyTorch uses for half and bfloat16 matmuls on CUDA (reduced-precision reductions inside
the GEMM are opt-in there: ``torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction``
/ ``allow_bf16_reduced_precision_reduction``, documented in PyTorch's "CUDA semantics" notes).
Every other op (elementwise, softmax, norms, reductions, LSTM cells, ...) still runs the real
low-precision CPU kernel, so overflow, underflow and an unstable module in bfloat16/float16
show as before: what changes is only the cost of the GEMMs, not which dtype values are held in.

``check_step(..., cpu_kernels="native")`` (CLI ``--cpu-kernels native``) turns this off and
runs PyTorch's own CPU kernels; the default ``"auto"`` (:func:`resolve`) emulates only when the
model is big enough for it to pay (a dispatch mode puts ~20 us of Python in front of every op,
which on a tiny model, the CI zoo's 32-wide layers, costs more than its small native GEMMs; the
threshold was set with the mode). A model without convolutions gets :class:`Float32GEMMs`,
the same arithmetic as kernels of the GEMMs only; a model with convolutions gets them too
under CUDA's autocast rules, its convolutions computed in float32 at the autocast kernel
(:func:`devlint.runtime.autocast_policy.float32_convolutions`, which ``"auto"`` then always
picks: it is cheaper than PyTorch's low-precision CPU convolutions), and the mode otherwise.
"""

from __future__ import annotations

import contextlib
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import autocast_policy

__all__ = ["HEAVY_OPS", "CPU_KERNELS", "AUTO_MIN_ELEMENTS", "Float32Accumulate", "Float32GEMMs", "cpu_kernels",
           "resolve"]

_aten = torch.ops.aten
#: The ops computed in float32 from low-precision operands (functional overloads only: an
#: ``out=`` or in-place overload runs natively).
HEAVY_OPS = frozenset({
    _aten.mm.default, _aten.bmm.default, _aten.addmm.default, _aten.baddbmm.default,
    _aten.addbmm.default, _aten.addmv.default, _aten.mv.default, _aten.dot.default,
    _aten.convolution.default, _aten._convolution.default, _aten.convolution_backward.default,
})
#: The values of ``check_step(cpu_kernels=...)``.
CPU_KERNELS = ("auto", "emulated", "native")
#: ``"auto"`` emulates when the model's largest parameter has at least this many elements
#: (a 256x256 weight). On the zoo (AVX2 EPYC, one thread) below it the emulated bfloat16 run
#: costs 3-4 plain steps against 1.4-1.6 native (per-op dispatch overhead); at 8x the width
#: native costs 8-13 and emulated ~1.5.
AUTO_MIN_ELEMENTS = 1 << 16
_LOW = (torch.bfloat16, torch.float16)


def _low_dtype(args) -> torch.dtype | None:
    """The dtype shared by every floating-point tensor in ``args`` when it is bfloat16 or
    float16 and they are all on the CPU, else None (mixed dtypes run natively, so they raise
    as the native op does)."""
    found: set = set()
    _dtypes(args, found)
    if len(found) == 1:
        ((dtype, device),) = found
        if dtype in _LOW and device == "cpu":
            return dtype
    return None


def _dtypes(args, found: set) -> None:
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.is_floating_point():
                found.add((a.dtype, a.device.type))
        elif isinstance(a, (list, tuple)):
            _dtypes(a, found)


def _widen(obj, dtype):
    if isinstance(obj, torch.Tensor):
        return obj.float() if obj.dtype == dtype else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_widen(v, dtype) for v in obj)
    return obj


def _narrow(obj, dtype):
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.dtype == torch.float32 else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_narrow(v, dtype) for v in obj)
    return obj


class Float32Accumulate(TorchDispatchMode):
    """While active, every op of :data:`HEAVY_OPS` whose operands are bfloat16/float16 CPU
    tensors is computed in float32 from those operands and its floating-point outputs rounded
    once to the operands' dtype (round to nearest even, as ``Tensor.to``). Shapes, dtypes and
    devices of the outputs are those of the native op; ``ops`` counts the ops replaced.
    Everything else passes through unchanged. Errors of the op propagate."""

    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in HEAVY_OPS:
            dtype = _low_dtype(args)
            if dtype is not None:
                self.ops += 1
                return _narrow(func(*_widen(args, dtype), **kwargs), dtype)
        return func(*args, **kwargs)


class Float32GEMMs:
    """The GEMMs of :class:`Float32Accumulate` (``mm``, ``bmm``, ``addmm``, ``baddbmm``; the
    same arithmetic) at a fraction of its cost, as a context manager: their CPU kernels are
    replaced while it is active (``torch.library.Library("aten", "IMPL")``, removed on exit,
    which restores PyTorch's), so Python runs only for these ops and not in front of every op
    as a dispatch mode does (measured: nn.Transformer's bfloat16 forward and backward, 658 ops,
    40 ms under the mode, ~28 ms with these kernels, 19 ms in float32 without autocast).
    Every dtype goes through the kernel: float32 and other operands are computed by the op's
    ``out=`` overload, the same native kernel, so their results do not change. Convolutions
    are not covered (their backward has no second entry point to call): see
    :func:`cpu_kernels`. ``ops`` counts the ops computed from low-precision operands."""

    _OUT = {"mm": _aten.mm.out, "bmm": _aten.bmm.out, "addmm": _aten.addmm.out,
            "baddbmm": _aten.baddbmm.out}

    def __init__(self):
        self.ops = 0
        self._lib = None

    def _kernel(self, out_op):
        def kernel(*args, **kwargs):
            dtype = _low_dtype(args)
            if dtype is None:
                return out_op(*args, **kwargs, out=args[0].new_empty(0))
            self.ops += 1
            return out_op(*_widen(args, dtype), **kwargs,
                          out=args[0].new_empty(0, dtype=torch.float32)).to(dtype)
        return kernel

    def __enter__(self):
        self._lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():  # "overriding a previously registered kernel": meant
            warnings.simplefilter("ignore")
            for name, out_op in self._OUT.items():
                self._lib.impl(name, self._kernel(out_op), "CPU")
        return self

    def __exit__(self, *exc):
        self._lib._destroy()
        self._lib = None
        return False


def resolve(kind: str, model: torch.nn.Module, policy: str = "cuda") -> str:
    """``"emulated"`` or ``"native"`` for a ``cpu_kernels`` value and a model: ``"auto"`` is
    ``"emulated"`` when the largest parameter of ``model`` has at least
    :data:`AUTO_MIN_ELEMENTS` elements, or when ``model`` holds a convolution and the runs
    follow CUDA's autocast rules (``policy``, :mod:`devlint.runtime.autocast_policy`: its
    convolutions then compute in float32 without a dispatch mode, which costs less than
    PyTorch's low-precision CPU convolutions; measured on one thread, a float16 forward and
    backward of the EfficientNet-like zoo models: 54 -> 30 ms and 252 -> 66 ms, float32
    17 and 68 ms; the small ResNets even), else ``"native"``.

    Raises:
        ValueError: ``kind`` is not one of :data:`CPU_KERNELS`.
    """
    if kind not in CPU_KERNELS:
        raise ValueError(f"unknown cpu_kernels {kind!r}; use one of {', '.join(CPU_KERNELS)}")
    if kind != "auto":
        return kind
    largest = max((p.numel() for p in model.parameters()), default=0)
    if largest >= AUTO_MIN_ELEMENTS or (policy == "cuda" and _has_convolution(model)):
        return "emulated"
    return "native"


def _has_convolution(model) -> bool:
    return model is not None and any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in model.modules())


def cpu_kernels(device: str, dtype: torch.dtype, kind: str = "emulated", model=None):
    """The context a run on ``device`` in ``dtype`` computes in: for ``kind="emulated"`` on
    the CPU in bfloat16/float16, :class:`Float32GEMMs` when ``model`` (the module the run
    computes) holds no convolution; with convolutions, under CUDA's autocast rules
    (:func:`devlint.runtime.autocast_policy.current`), the same GEMM kernels and the
    convolutions autocast casts computed in float32 at the autocast kernel
    (:func:`devlint.runtime.autocast_policy.float32_convolutions`: no dispatch mode), else
    :class:`Float32Accumulate` (also without a model); else a no-op context (``"auto"`` must be resolved first, :func:`resolve`; here it means
    native).

    Raises:
        ValueError: ``kind`` is not one of :data:`CPU_KERNELS`.
    """
    if kind not in CPU_KERNELS:
        raise ValueError(f"unknown cpu_kernels {kind!r}; use one of {', '.join(CPU_KERNELS)}")
    if kind == "emulated" and device == "cpu" and dtype in _LOW:
        if model is not None and not _has_convolution(model):
            return Float32GEMMs()
        if model is not None and autocast_policy.current() == "cuda":
            return _GEMMsAndConvolutions()
        return Float32Accumulate()
    return contextlib.nullcontext()


class _GEMMsAndConvolutions(contextlib.ExitStack):
    """:class:`Float32GEMMs` with the convolutions autocast casts computed in float32
    (:func:`devlint.runtime.autocast_policy.float32_convolutions`); ``ops`` counts the GEMMs."""

    def __enter__(self):
        super().__enter__()
        self.gemms = self.enter_context(Float32GEMMs())
        self.enter_context(autocast_policy.float32_convolutions())
        return self

    @property
    def ops(self) -> int:
        return self.gemms.ops
