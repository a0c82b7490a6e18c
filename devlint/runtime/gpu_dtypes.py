"""Whether a GPU refuses, too, a low-precision op that the CPU refused.

A CPU run that stands in for a CUDA GPU and raises "not implemented for 'Half'" usually meets a
kernel only the CPU lacks, and the run is "not checked here" (a note). Some functions have no
half-precision kernel on any device, and autocast does not cast their inputs on CUDA (they are in
none of CUDA autocast's lists), so the same step raises on the GPU:

- the linear-algebra solvers and decompositions: their documentation in the installed torch
  says which dtypes they take, "Supports input of float, double, cfloat and cdouble dtypes"
  (``torch.linalg.solve``, ``cholesky``, ``eigh``, ``inv``, ``qr``, ``svd``, ``lstsq``, ...,
  ``torch.cholesky_solve``; torch 2.13), read here from their docstrings (an alias such as
  ``torch.cholesky`` by its ``torch.linalg`` namesake); ``torch.linalg.matrix_exp`` lists
  bfloat16 and ``torch.linalg.vecdot`` half, so those are not refused;
- a dtype check made before any kernel runs, on every device: "Low precision dtypes not
  supported" (``checkFloatingOrComplex`` with ``allow_low_precision_dtypes=false``,
  aten/src/ATen/native/LinearAlgebraUtils.h: ``linalg.inv``, ``slogdet``, ``logdet``),
  "quantile() input tensor must be either float or double dtype" (aten/src/ATen/native/Sorting.cpp).

:func:`low_precision_refusal` replays the loss to find the torch function that raised
(:func:`dtype_origin.dtype_error_origin`) and returns the ``step-error`` finding for a refusal a
GPU shares; :func:`float32_fix` says how to fix such an error whatever the route that found it.
"""

from __future__ import annotations

import re

import torch

from .compare import DTYPES
from .dtype_origin import dtype_error_origin
from .report import Finding

__all__ = ["documented_dtypes", "float32_fix", "low_precision_refusal"]

#: Errors of a dtype check that runs before the kernel, on every device.
_EVERY_DEVICE = re.compile(r"Low precision dtypes not supported|must be either float or double"
                           r"|doesn't handle types other than float and double"
                           r"|of float, double, cfloat or cdouble types")
_SUPPORTS = re.compile(r"[Ss]upports inputs? of ([^.]*?) dtypes")
#: torch names whose torch.linalg namesake is documented under another name.
_ALIASES = {"inverse": "inv", "pinverse": "pinv", "logdet": "slogdet"}


def documented_dtypes(api: str) -> str | None:
    """The dtypes the documentation of ``api`` (``"torch.linalg.solve"``) says it takes
    (``"float, double, cfloat and cdouble"``), from the installed torch's docstring or its
    ``torch.linalg`` namesake's; None when it does not say."""
    name = api.rsplit(".", 1)[-1]
    candidates = [api] + [f"torch.linalg.{_ALIASES.get(name, name)}"]
    for path in candidates:
        obj = torch
        for part in path.split(".")[1:]:
            obj = getattr(obj, part, None)
        found = _SUPPORTS.search(getattr(obj, "__doc__", None) or "") if obj is not None else None
        if found:
            return found.group(1)
    return None


def _refused(api: str, error: str, dtype: torch.dtype) -> str | None:
    """Why a GPU refuses ``api`` on ``dtype`` too, in a few words; None when it may not."""
    if _EVERY_DEVICE.search(error):
        return "the same dtype check runs on every device"
    said = documented_dtypes(api)
    wanted = {torch.float16: ("half", "float16"), torch.bfloat16: ("bfloat16",)}[dtype]
    if said is not None and not any(w in said for w in wanted):
        return f"its documentation lists {said} only, on every device"
    return None


def float32_fix(api: str | None, error: str) -> str | None:
    """The fix for a function that takes float32/float64 only (``error`` its refusal on every
    device), or None."""
    if api is None or not _EVERY_DEVICE.search(error):
        return None
    return f"call {api} on float32 inputs (.float()) under torch.autocast(..., enabled=False), cast back after"


def low_precision_refusal(step, raw, seed: int) -> Finding | None:
    """The ``step-error`` finding for a low-precision CPU run that raised at a function a GPU
    refuses on that dtype too (see the module docstring), or None. Never raises."""
    dtype = DTYPES[raw.mode]
    origin = dtype_error_origin(step, raw.device, dtype, seed, kernels=raw.kernels or "emulated")
    if origin is None or origin.api is None:
        return None
    why = _refused(origin.api, raw.error or "", dtype)
    if why is None:
        return None
    return Finding(
        "step-error", f"{origin.api} of a {raw.mode} input (autocast's output) fails on a GPU too: {why} "
        f"(the cpu raised {raw.error} at {origin.op}; the float32 run passes)",
        f"compute it in float32: {origin.api}(x.float(), ...) under torch.autocast(..., enabled=False)",
        module=origin.module, op=origin.api, device=raw.device, mode=raw.mode)
