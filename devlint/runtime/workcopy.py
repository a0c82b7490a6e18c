"""The model copy the runs of a check work on: one deep copy of ``step.model``, restored in
place before each run and taken back from the stand-in device after one; and the heap
memory a finished run freed, given back to the OS."""

from __future__ import annotations

import copy
import copyreg
import functools
from collections import OrderedDict

import torch

from . import standin

__all__ = ["WorkingCopy", "trim_heap", "clone_model"]

#: Values ``copy.deepcopy`` returns as they are (its atomic types), kept by :func:`clone_model`.
_ATOMIC = frozenset({type(None), bool, int, float, complex, str, bytes})
#: The plain attribute types a module's signature holds (:meth:`WorkingCopy.take`).
_PLAIN = frozenset({bool, int, float, str})


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
        self._named: dict | None = None
        self._state: list | None = None

    def original_parameters(self) -> dict[str, torch.Tensor]:
        """The original's parameters by name (``named_parameters``), read once: the runs
        never change the original."""
        if self._named is None:
            self._named = dict(self.model.named_parameters())
        return self._named

    def original_state(self) -> list[tuple[str, torch.Tensor]]:
        """The original's buffers, then its parameters, ``(name, detached tensor)`` in
        ``named_buffers`` / ``named_parameters`` order, read once (what each run's buffers
        are compared from, see :func:`devlint.runtime.buffers.measure_state`)."""
        if self._state is None:
            self._state = [(n, t.detach()) for n, t in [*self.model.named_buffers(),
                                                         *self.original_parameters().items()]]
        return self._state

    @staticmethod
    def _signature(model) -> tuple[tuple, list]:
        """(the signature take() compares, the parameters and buffers in its order), in one
        walk over the modules (``named_modules(remove_duplicate=False)``'s order; a
        parameter's or buffer's name is ``(module path, name)``)."""
        tensors: list = []
        plain: list = []

        def walk(prefix: str, mod) -> None:
            for store in (mod._parameters, mod._buffers):
                tensors.extend([((prefix, k), t) for k, t in store.items() if t is not None])
            plain.extend([(k, v) for k, v in mod.__dict__.items() if v is None or type(v) in _PLAIN])
            for name, sub in mod._modules.items():
                if sub is not None:
                    walk(f"{prefix}.{name}" if prefix else name, sub)

        walk("", model)
        first: dict[int, int] = {}
        ties = tuple([first.setdefault(id(t), i) for i, (_, t) in enumerate(tensors)])
        meta = tuple([(n, type(t), t.shape, t.dtype, t.device, t.requires_grad) for n, t in tensors])
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
        self.copy = clone_model(self.model)
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


def clone_model(model: torch.nn.Module) -> torch.nn.Module:
    """``copy.deepcopy(model)``, the same copy made faster: a module whose class copies the
    way ``nn.Module`` does (no ``__deepcopy__``, ``__reduce__``, ``__reduce_ex__``,
    ``__getnewargs__`` or ``__getstate__`` of its own) is rebuilt here as deepcopy rebuilds it
    (``cls.__new__``, then its ``__setstate__`` with the copied attributes), its atomic
    attributes and tuples of them kept, its empty hook tables made anew and its submodules
    cloned the same way; everything else (parameters,
    buffers, non-empty hook tables, any other attribute, any module of another class) goes
    through ``copy.deepcopy`` with one shared memo, so ties and aliases are kept as deepcopy
    keeps them. What deepcopy spends per module is its generic protocol (``__reduce_ex__``,
    a state dict, ~15 empty ``OrderedDict`` hook tables reconstructed one by one): ~40 ms of
    an EfficientNet-like model's ~165 modules at one thread, ~1 plain step of its training.

    Raises:
        whatever ``copy.deepcopy`` raises on the model (a non-leaf tensor attribute ...).
    """
    return _clone(model, {})


@functools.cache
def _module_like(cls: type) -> bool:
    """Whether ``copy.deepcopy`` copies an instance of ``cls`` as it copies an ``nn.Module``
    (see :func:`clone_model`)."""
    module = torch.nn.Module
    return (issubclass(cls, module) and getattr(cls, "__deepcopy__", None) is None
            and cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__
            and cls.__getstate__ is module.__getstate__
            and not hasattr(cls, "__getnewargs_ex__") and not hasattr(cls, "__getnewargs__")
            and cls not in copy._deepcopy_dispatch)  # noqa: SLF001 - deepcopy's own table, read only


def _clone(obj, memo: dict):
    cls = type(obj)
    if not _module_like(cls) or cls in copyreg.dispatch_table:
        return copy.deepcopy(obj, memo)
    done = memo.get(id(obj), memo)
    if done is not memo:
        return done
    new = cls.__new__(cls)
    memo[id(obj)] = new
    memo.setdefault(id(memo), []).append(obj)  # kept alive while copying, as deepcopy does
    state = {}
    for k, v in obj.__dict__.items():
        if k == "_compiled_call_impl":  # (what Module.__getstate__ leaves out)
            continue
        t = type(v)
        if t in _ATOMIC:
            state[k] = v
        elif t in (OrderedDict, set) and not v and id(v) not in memo:
            state[k] = memo[id(v)] = t()
        elif t is tuple and all(type(x) in _ATOMIC for x in v):
            state[k] = v  # (deepcopy returns such a tuple itself)
        elif k == "_modules" and t is dict and id(v) not in memo:
            state[k] = memo[id(v)] = {}
            for name, m in v.items():
                state[k][name] = None if m is None else _clone(m, memo)
        else:
            state[k] = copy.deepcopy(v, memo)
    new.__setstate__(state)
    return new


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
