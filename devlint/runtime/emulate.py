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
runs PyTorch's own CPU kernels.
"""

from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["HEAVY_OPS", "CPU_KERNELS", "Float32Accumulate", "cpu_kernels"]

_aten = torch.ops.aten
#: The ops computed in float32 from low-precision operands (functional overloads only: an
#: ``out=`` or in-place overload runs natively).
HEAVY_OPS = frozenset({
    _aten.mm.default, _aten.bmm.default, _aten.addmm.default, _aten.baddbmm.default,
    _aten.addbmm.default, _aten.addmv.default, _aten.mv.default, _aten.dot.default,
    _aten.convolution.default, _aten._convolution.default, _aten.convolution_backward.default,
})
#: The values of ``check_step(cpu_kernels=...)``.
CPU_KERNELS = ("emulated", "native")
_LOW = (torch.bfloat16, torch.float16)


def _low_dtype(args) -> torch.dtype | None:
    """The dtype of the first CPU bfloat16/float16 tensor in ``args``, else None."""
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.dtype in _LOW and a.device.type == "cpu":
                return a.dtype
        elif isinstance(a, (list, tuple)):
            found = _low_dtype(a)
            if found is not None:
                return found
    return None


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


def cpu_kernels(device: str, dtype: torch.dtype, kind: str = "emulated"):
    """The context a run on ``device`` in ``dtype`` computes in: :class:`Float32Accumulate`
    for ``kind="emulated"`` on the CPU in bfloat16/float16, else a no-op context.

    Raises:
        ValueError: ``kind`` is not one of :data:`CPU_KERNELS`.
    """
    if kind not in CPU_KERNELS:
        raise ValueError(f"unknown cpu_kernels {kind!r}; use one of {', '.join(CPU_KERNELS)}")
    if kind == "emulated" and device == "cpu" and dtype in _LOW:
        return Float32Accumulate()
    return contextlib.nullcontext()
