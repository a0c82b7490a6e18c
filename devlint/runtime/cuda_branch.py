"""The branch a GPU takes, on the stand-in device: code that asks whether it runs on CUDA.

Old model code moves what it makes by asking for CUDA itself (``if x.is_cuda: mask =
mask.cuda()``, ``h.to("cuda")``, ``torch.zeros(n, device="cuda")`` on that branch). On the
stand-in (:mod:`devlint.runtime.standin`, device ``meta``) such code took its CPU branch,
left the tensor on the CPU and was reported as a placement bug a GPU does not have; the
CUDA branch itself raised "Torch not compiled with CUDA enabled" on a CPU-only torch.

While :func:`cuda_branch` runs (inside :func:`devlint.runtime.standin.stand_in` only):

- a tagged tensor's ``is_cuda`` is True (a plain CPU tensor's stays False);
- ``Tensor.cuda()`` (any index, ``non_blocking``, ``memory_format``), ``Tensor.to`` with a
  CUDA device (``"cuda"``, ``"cuda:1"``, ``torch.device("cuda")``, positional or
  ``device=``), and the factories of :data:`FACTORIES` and ``Tensor.new_zeros`` /
  ``new_ones`` / ``new_empty`` / ``new_full`` / ``new_tensor`` with ``device=`` a CUDA device
  move onto the stand-in, as ``.to("meta")`` / ``device="meta"`` do: the tensor is tagged.

Left as they are, and why: ``x.device`` is a ``torch.device`` (a C type that cannot be
subclassed) that every factory reads, so ``x.device.type == "cuda"`` stays False (a device
that said ``cuda`` would send ``device=x.device`` factories to a CUDA that is not there);
``torch.cuda.is_available()`` stays False (code under it goes on to ``torch.cuda``
calls, streams, ``torch.cuda.amp`` and ``device_count()`` that all need a real CUDA).
"""

from __future__ import annotations

import contextlib

import torch

__all__ = ["FACTORIES", "cuda_branch"]

#: ``torch`` factories whose ``device="cuda"`` is read as the stand-in inside the run.
FACTORIES = ("zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace", "eye",
             "rand", "randn", "randint", "randperm", "tensor", "as_tensor", "asarray", "zeros_like",
             "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like")
#: ``Tensor`` methods taking ``device=``: ``x.new_zeros(n, device="cuda")``.
_NEW = ("new_zeros", "new_ones", "new_empty", "new_full", "new_tensor")


def _is_cuda(device) -> bool:
    """Whether ``device`` (a string, ``torch.device`` or anything else) names CUDA."""
    if type(device) is str:
        return device == "cuda" or device.startswith("cuda:")
    return type(device) is torch.device and device.type == "cuda"


def _device_kwarg(f, stand_in: str):
    def call(*args, **kwargs):
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = stand_in
        return f(*args, **kwargs)

    return call


def _to(f, stand_in: str):
    def to(self, *args, **kwargs):
        if args and _is_cuda(args[0]):
            args = (stand_in, *args[1:])
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = stand_in
        return f(self, *args, **kwargs)

    return to


def _cuda(stand_in: str):
    def cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        if device is not None and type(device) is not int and not _is_cuda(device):
            raise RuntimeError(f"Invalid device, must be cuda device (got {device!r})")
        return self.to(stand_in, non_blocking=non_blocking, memory_format=memory_format)

    return cuda


@contextlib.contextmanager
def cuda_branch(tagged: type, stand_in: str):
    """Make the block take the CUDA branch on the stand-in (see the module's docstring).

    Args:
        tagged: the stand-in's tensor class (:class:`devlint.runtime.standin.Tagged`); its
            ``is_cuda`` reads True in the block.
        stand_in: the stand-in's device name (``"meta"``), what CUDA moves become.

    Everything patched (``tagged.is_cuda``, ``torch.Tensor.cuda`` / ``to`` / ``new_*``, the
    ``torch`` factories) is put back on exit, also when the block raises.
    """
    missing = object()
    saved = [(torch, n, torch.__dict__[n]) for n in FACTORIES if n in torch.__dict__]
    saved += [(torch.Tensor, n, torch.Tensor.__dict__.get(n, missing)) for n in (*_NEW, "to", "cuda")]
    saved.append((tagged, "is_cuda", tagged.__dict__.get("is_cuda", missing)))
    try:
        for owner, name, own in saved:
            f = getattr(owner, name)
            if owner is tagged:
                new = property(lambda self: True, doc="True on the stand-in: the CUDA branch")
            elif name == "to":
                new = _to(f, stand_in)
            elif name == "cuda":
                new = _cuda(stand_in)
            else:
                new = _device_kwarg(f, stand_in)
            setattr(owner, name, new)
        yield
    finally:
        for owner, name, own in saved:
            if own is missing:  # inherited before (from TensorBase): inherit it again
                if name in owner.__dict__:
                    delattr(owner, name)
            else:
                setattr(owner, name, own)
