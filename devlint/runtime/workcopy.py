"""The model copy the runs of a check work on: one deep copy of ``step.model``, restored in
place before each run and taken back from the stand-in device after one; and the heap
memory a finished run freed, given back to the OS."""

from __future__ import annotations

import copy

import torch

from . import standin

__all__ = ["WorkingCopy", "trim_heap"]


_MALLOC_TRIM: list = []


def trim_heap() -> None:
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


class WorkingCopy:
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
                if dst:  # (a model with no parameters or buffers of its own: nothing to copy)
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
        if any(type(m)._apply is not torch.nn.Module._apply for m in model.modules()):
            model._apply(lambda t: t)  # what modules derive from their parameters (RNN flat weights)
        if any(_holds_tagged(v) for mod in model.modules() for k, v in vars(mod).items()
               if k not in standin.MODULE_INTERNALS):
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
