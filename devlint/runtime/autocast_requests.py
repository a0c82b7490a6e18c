"""Whether a ``torch.autocast`` region was asked to be enabled, after torch changed it.

On a machine without CUDA, ``torch.autocast("cuda")`` (and ``torch.cuda.amp.autocast()``)
warns "CUDA is not available ... Disabling autocast" and makes the region disabled: the
region no longer says whether its author wanted it on. A region made while a devlint run is
active is translated to the CPU's as it is made (:func:`devlint.runtime.own_autocast.cuda_on_cpu`);
one made earlier, a decorator applied at import (``@torch.autocast("cuda")`` on a ``forward``)
or a region kept by a module or script, is met only when it is entered. To run it as the GPU
would, the CPU runs need what was asked:

- :func:`remember` (installed when :mod:`devlint.runtime.step` is imported, so before a
  model file that imports ``TrainingStep`` defines its classes) makes every region keep the
  ``enabled`` flag as asked, and every ``torch.amp.GradScaler`` its arguments (a
  ``GradScaler("cuda")`` made at import by a training script is disabled and keeps none of
  them; nothing else changes);
- for a region made before that, a decorator's own source says it: :func:`asked_enabled`
  reads the ``@...autocast(...)`` line above the decorated function (``enabled=`` a literal,
  or absent: enabled).
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap

import torch

__all__ = ["remember", "asked_enabled", "asked_scaler"]

_KEY = "_devlint_asked_enabled"
_SCALER_KEY = "_devlint_asked_scaler"


def remember() -> None:
    """Make every ``torch.autocast`` region made from now on (``torch.cuda.amp.autocast`` too)
    keep its ``enabled`` argument as asked, an attribute of the region; torch's behaviour is
    unchanged. It wraps the class's ``__new__``, not ``__init__``, so torch's "CUDA is not
    available" warning still points at the line that made the region. Idempotent."""
    cls = torch.amp.autocast_mode.autocast
    if getattr(cls.__dict__.get("__new__"), "_devlint_remembers", False):
        return

    def new(kind, *args, **kwargs):
        self = object.__new__(kind)
        if kind is not cls:
            return self
        try:
            asked = _signature(kind).bind(self, *args, **kwargs).arguments.get("enabled", True)
        except TypeError:  # torch's __init__ raises its own error for these arguments
            return self
        self.__dict__[_KEY] = bool(asked)
        return self

    new._devlint_remembers = True
    cls.__new__ = new
    # torch.cuda.amp.autocast(enabled) keeps its own __new__ (a deprecation wrapper) that
    # calls the base's without the arguments: its flag is read where its __init__ takes it
    sub = torch.cuda.amp.autocast
    real_sub = sub.__init__

    @functools.wraps(real_sub)
    def sub_init(self, *args, **kwargs):
        real_sub(self, *args, **kwargs)
        self.__dict__[_KEY] = bool(_signature(sub).bind(self, *args, **kwargs).arguments.get("enabled", True))

    sub.__init__ = sub_init
    # a GradScaler("cuda") made without CUDA keeps none of its settings (disabled, it sets
    # nothing): keep them as asked, from __new__ so its warning still points at the caller
    scaler = torch.amp.GradScaler

    def scaler_new(kind, *args, **kwargs):
        self = object.__new__(kind)
        try:
            bound = _signature(kind).bind(self, *args, **kwargs)
        except TypeError:  # torch's __init__ raises its own error for these arguments
            return self
        bound.apply_defaults()
        asked = {k: v for k, v in bound.arguments.items() if k != "self"}
        asked.setdefault("device", "cuda")  # torch.cuda.amp.GradScaler
        self.__dict__[_SCALER_KEY] = asked
        return self

    scaler.__new__ = scaler_new


@functools.cache
def _signature(kind) -> inspect.Signature:
    return inspect.signature(kind.__init__)


@functools.cache
def _decorator_code():
    """The code object of the wrapper ``torch.autocast(...)(func)`` returns (its frame holds
    ``func``)."""
    return torch.amp.autocast_mode.autocast_decorator(None, lambda: None).__code__


def asked_enabled(region, caller=None) -> bool | None:
    """Whether ``region`` (a ``torch.autocast``) was asked to be enabled: as :func:`remember`
    kept it; else, when ``caller`` (the frame that entered it) is a decorator's wrapper, as
    the decorator line of the function it wraps says; ``None`` when neither tells."""
    asked = region.__dict__.get(_KEY)
    if asked is not None:
        return asked
    if caller is None or caller.f_code is not _decorator_code():
        return None
    func = caller.f_locals.get("func")
    return _from_source(func) if func is not None else None


@functools.cache
def _source_flag(source: str) -> bool | None:
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    for deco in fn.decorator_list if fn is not None else ():
        if not (isinstance(deco, ast.Call) and _last_name(deco.func) == "autocast"):
            continue
        flag = next((k.value for k in deco.keywords if k.arg == "enabled"), None)
        if flag is None:
            return True
        try:
            value = ast.literal_eval(flag)
        except ValueError:
            return None
        return bool(value) if isinstance(value, bool) else None
    return None


def _last_name(node) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _from_source(func) -> bool | None:
    try:
        source = inspect.getsource(inspect.unwrap(func))
    except (OSError, TypeError):
        return None
    return _source_flag(source)


def asked_scaler(scaler) -> dict | None:
    """The arguments a ``torch.amp.GradScaler`` was made with (``device``, ``init_scale``,
    ``growth_factor``, ``backoff_factor``, ``growth_interval``, ``enabled``), as
    :func:`remember` kept them; None for one made before it was installed."""
    return scaler.__dict__.get(_SCALER_KEY)
