"""Whether a GPU's FFT refuses what the CPU's FFT refused, when a low-precision CPU run stands in
for a CUDA GPU.

PyTorch's CPU FFT (pocketfft/MKL) has no float16 or bfloat16 transforms: ``torch.fft.rfft`` of
an autocast output raises "Unsupported dtype Half" on the CPU, which a check reports as "not
checked here" (the op has no kernel on this device). A GPU's FFT (cuFFT) differs by dtype
(``torch.fft.fft`` docs, torch 2.13, the note on ``torch.half``: half precision is supported on
CUDA "with GPU Architecture SM53 or greater. However it only supports powers of 2 signal length
in every transformed dimension"; bfloat16 has no cuFFT transform, the GPU raises "Unsupported
dtype BFloat16"):

- bfloat16: the GPU has no kernel either (asked of the ``meta`` device, :func:`gpu_has_fft`):
  a note, as a check on the GPU gives, that now says so;
- float16 with a transformed size that is not a power of two: the GPU raises ("cuFFT only
  supports dimensions whose sizes are powers of two when computing in half precision"), an
  error of the step, not a missing kernel: a ``step-error`` finding;
- float16 with power-of-two sizes: the GPU computes it, the CPU cannot say how: a note.

:func:`gpu_fft_refusal` replays ``loss_fn`` under autocast and returns the first FFT op whose
low-precision input a GPU refuses.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from . import autocast_policy, emulate
from .own_autocast import cuda_on_cpu
from .standin import Tracker, module_label
from .step import TrainingStep, map_tensors, seed_host

__all__ = ["FFTRefusal", "gpu_fft_refusal", "refusal"]

_aten = torch.ops.aten
#: The ATen FFT kernels every ``torch.fft`` function ends in, and which argument lists the
#: transformed dimensions (the signal sizes are the input's, except ``_fft_c2r``'s last one,
#: its ``last_dim_size`` argument).
_FFT = {_aten._fft_r2c.default: "r2c", _aten._fft_c2c.default: "c2c", _aten._fft_c2r.default: "c2r"}
_HALF = (torch.float16, torch.complex32)


@dataclass
class FFTRefusal:
    """The FFT function a GPU refuses (``"torch.fft.rfft"``), the module running it
    (``"path (Class)"``), its input's dtype (``"float16"``) and the signal sizes (elements per
    transformed dimension), the GPU's own words for it (``reason``), and whether the GPU lacks
    the kernel altogether (``missing``)."""

    op: str
    module: str
    dtype: str
    sizes: list
    reason: str
    missing: bool  # no GPU kernel for the dtype at all (a note, as on the GPU), else a step error


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _sizes(func, args) -> list:
    """The signal sizes of the ATen FFT op ``func`` on ``args`` (elements per transformed
    dimension)."""
    x, dims = args[0], [d % max(args[0].dim(), 1) for d in args[1]]
    sizes = [int(x.shape[d]) for d in dims]
    if _FFT[func] == "c2r" and len(args) > 3 and sizes:
        sizes[-1] = int(args[3])
    return sizes


@functools.cache
def gpu_has_fft(dtype: torch.dtype) -> bool:
    """Whether the installed torch's GPU FFT takes ``dtype`` at all: asked of the ``meta``
    device, which shares CUDA's dtype check (``promote_type_fft`` accepts half precision on
    CUDA and meta only; torch 2.13: float16 yes, bfloat16 no)."""
    try:
        torch.fft.fft(torch.empty(2, dtype=dtype, device="meta"))
    except RuntimeError:
        return False
    return True


def refusal(dtype: torch.dtype, sizes: list) -> tuple[str, bool] | None:
    """``(a CUDA GPU's words, whether it is a missing kernel)`` when a GPU refuses a ``dtype``
    transform of signal ``sizes`` (see the module docstring); None when it computes it. A
    missing kernel (no GPU FFT for the dtype: bfloat16) is what the CPU says too; a size a GPU
    refuses in half precision is an error of the step on a GPU only."""
    if not gpu_has_fft(dtype):
        name = str(dtype).removeprefix("torch.")
        return f"a GPU has no {name} FFT either (cuFFT through torch {torch.__version__})", True
    if dtype in _HALF and not all(_power_of_two(n) for n in sizes):
        return ("cuFFT computes half precision only for power-of-two sizes (a GPU raises \"cuFFT only "
                "supports dimensions whose sizes are powers of two when computing in half precision\"), "
                f"and this transform's sizes are {sizes}"), False
    return None


#: The ``torch.fft`` functions that transform (not the frequency helpers and shifts), and the
#: short-time transforms built on the same kernels.
_FFT_FUNCTIONS = {**{getattr(torch.fft, n): f"fft.{n}" for n in dir(torch.fft) if "fft" in n and not n.startswith("_")
                     and n not in ("fftfreq", "rfftfreq", "fftshift", "ifftshift")},
                  torch.stft: "stft", torch.istft: "istft", torch.Tensor.stft: "stft", torch.Tensor.istft: "istft"}


class _Transforms(TorchDispatchMode):
    """Notes the signal sizes of every ATen FFT op that runs while active."""

    def __init__(self):
        super().__init__()
        self.sizes: list[list] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in _FFT:
            self.sizes.append(_sizes(func, args))
        return func(*args, **(kwargs or {}))


def _wide(obj):
    if isinstance(obj, torch.Tensor) and obj.dtype in (torch.bfloat16, torch.float16):
        return obj.float()
    if isinstance(obj, torch.Tensor) and obj.dtype == torch.complex32:
        return obj.to(torch.complex64)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_wide(o) for o in obj)
    return obj


class _Watch(TorchFunctionMode):
    """When a ``torch.fft`` function raises on a low-precision input, finds whether a GPU
    refuses it too: the same call on the input widened to float32 shows the transforms' signal
    sizes (:class:`_Transforms`), which :func:`refusal` judges in the input's dtype."""

    def __init__(self, tracker, model):
        super().__init__()
        self.tracker, self.model = tracker, model
        self.found: FFTRefusal | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            return func(*args, **kwargs)
        except Exception:
            x = args[0] if args else kwargs.get("input")
            if self.found is None and func in _FFT_FUNCTIONS and isinstance(x, torch.Tensor):
                self._judge(func, x.dtype, args, kwargs)
            raise

    def _judge(self, func, dtype, args, kwargs) -> None:
        seen = _Transforms()
        try:
            with torch.no_grad(), seen:
                func(*_wide(args), **{k: _wide(v) for k, v in kwargs.items()})
        except Exception:  # noqa: BLE001 - not a dtype refusal, then: nothing to say
            return
        for sizes in seen.sizes:
            said = refusal(dtype, sizes)
            if said is not None:
                where = module_label(self.model, self.tracker.parents)
                self.found = FFTRefusal(f"torch.{_FFT_FUNCTIONS[func]}", where,
                                        str(dtype).removeprefix("torch."), sizes, *said)
                return


def gpu_fft_refusal(step: TrainingStep, dtype: torch.dtype, seed: int,
                    kernels: str = "emulated") -> FFTRefusal | None:
    """Replay ``step.loss_fn`` on a fresh CPU copy of the model under autocast ``dtype`` with
    CUDA's casting rules (:func:`devlint.runtime.autocast_policy.policy` is the caller's) and
    return the first FFT op a CUDA GPU would refuse (:func:`refusal`); None when there is none
    before the replay ends or raises. Never raises."""
    watch = None
    try:
        model = copy.deepcopy(step.model)
        batch = map_tensors(lambda t: t.to("cpu"), step.batch)
        tracker = Tracker()
        watch = _Watch(tracker, model)
        torch.manual_seed(seed)
        seed_host(seed)
        own = cuda_on_cpu() if autocast_policy.current() == "cuda" else contextlib.nullcontext()
        with emulate.cpu_kernels("cpu", dtype, kernels, model), tracker, watch, own:
            with torch.autocast(device_type="cpu", dtype=dtype):
                step.loss_fn(model, batch)
    except Exception:  # noqa: BLE001 - the diagnosis is best effort; the CPU raises where it looks
        return watch.found if watch is not None else None
    return watch.found
