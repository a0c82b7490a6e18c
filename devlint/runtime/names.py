"""How the runtime report names what it points at: modules, parameters, buffers, exceptions.

Every finding names a module as ``"path (Class)"`` (``"encoder.fc1 (Linear)"``), the model
itself as ``"Class (the model itself)"``, and an exception by its first line.
"""

from __future__ import annotations

import os
import re

import torch

__all__ = ["first_line", "module_of", "raising_module", "raising_function", "running_function", "reachable_tensors"]


def first_line(exc: BaseException) -> str:
    """``"Type: first line of the message"`` (trailing period dropped), or ``"Type"``."""
    text = (str(exc).strip().splitlines() or [""])[0].rstrip(".")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def reachable_tensors(step) -> dict[int, str]:
    """The tensors a step's code reaches by name outside the model and batch: id -> name.

    The globals of the Python modules that define the ``loss_fn``, the ``step_fn`` and the
    ``forward`` of each of the model's classes (``"MEAN (a global of train.py)"``, a
    module-level ImageNet mean: the file's name, or the module's without a file), and the
    cells a ``loss_fn``/``step_fn`` closes over (``"weights (a variable the loss_fn closes
    over)"``). torch's own modules are left out. Only read when a placement finding needs a
    name (a walk of a few module dictionaries)."""
    funcs = {"loss_fn": step.loss_fn, "step_fn": step.step_fn}
    spaces = [getattr(getattr(f, "__func__", f), "__globals__", None) for f in funcs.values()]
    spaces += [getattr(getattr(type(m), "forward", None), "__globals__", None) for m in step.model.modules()]
    found: dict[int, str] = {}
    seen: set = set()
    for space in spaces:
        if not isinstance(space, dict) or id(space) in seen or str(space.get("__name__", "")).startswith("torch"):
            continue
        seen.add(id(space))
        file = space.get("__file__")
        where = os.path.basename(file) if isinstance(file, str) else str(space.get("__name__", "?"))
        for key, value in list(space.items()):
            if isinstance(value, torch.Tensor):
                found.setdefault(id(value), f"{key} (a global of {where})")
    for role, f in funcs.items():
        f = getattr(f, "__func__", f)
        cells = zip(getattr(getattr(f, "__code__", None), "co_freevars", ()), getattr(f, "__closure__", None) or ())
        for key, cell in cells:
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, torch.Tensor):
                found.setdefault(id(value), f"{key} (a variable the {role} closes over)")
    return found


def module_of(model: torch.nn.Module, name: str) -> str:
    """The module holding the parameter or buffer ``name`` (``"blocks.0.fc.weight"``, a
    trailing ``" (buffer)"`` ignored), as ``"blocks.0.fc (Linear)"``; the bare path when it
    is not a submodule of ``model``."""
    name = name.removesuffix(" (buffer)")
    path = name.rsplit(".", 1)[0] if "." in name else ""
    if not path:
        return f"{type(model).__name__} (the model itself)"
    try:
        return f"{path} ({type(model.get_submodule(path)).__name__})"
    except AttributeError:
        return path


def raising_module(model: torch.nn.Module, exc: BaseException) -> str | None:
    """The innermost module of ``model`` whose ``forward`` (or any method) is on the traceback
    of ``exc``, as ``"path (Class)"``; None when the step raised outside the model. (A module
    tracker's record is only read after the forward, so it cannot name it.)"""
    names = {id(m): n for n, m in model.named_modules()}
    found = None
    tb = exc.__traceback__
    while tb is not None:
        me = tb.tb_frame.f_locals.get("self")
        if me is not None and id(me) in names:
            found = me
        tb = tb.tb_next
    if found is None:
        return None
    path = names[id(found)]
    return f"{path} ({type(found).__name__})" if path else f"{type(model).__name__} (the model itself)"


def _function_of(frame) -> tuple[str, str] | None:
    """``(Function qualname, method)`` when ``frame`` runs a method of a custom
    ``torch.autograd.Function`` (its ``ctx`` argument is the autograd node, whose
    ``_forward_cls`` is the Function)."""
    cls = getattr(frame.f_locals.get("ctx"), "_forward_cls", None)
    if isinstance(cls, type) and issubclass(cls, torch.autograd.Function):
        return cls.__qualname__, frame.f_code.co_name
    return None


def running_function(frame) -> str | None:
    """``"Cube.forward"``: the innermost custom ``torch.autograd.Function`` method running at
    ``frame`` or a frame that called it (``sys._getframe()`` inside an op), else None."""
    while frame is not None:
        found = _function_of(frame)
        if found is not None:
            return ".".join(found)
        frame = frame.f_back
    return None


def raising_function(exc: BaseException) -> tuple[str, str] | None:
    """``(autograd node class name, "forward"/"backward")`` of the custom
    ``torch.autograd.Function`` that raised ``exc``: the innermost one on its traceback, found
    by its ``ctx`` argument (the autograd node, whose ``_forward_cls`` is the Function), else
    the one the autograd engine names in the message (``"Function ScaleBackward returned an
    invalid gradient"``: backward); None when there is none."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        ctx = frame.f_locals.get("ctx")
        cls = getattr(ctx, "_forward_cls", None)
        if isinstance(cls, type) and issubclass(cls, torch.autograd.Function):
            found = (type(ctx).__name__, frame.f_code.co_name)
        tb = tb.tb_next
    if found is None:
        named = re.search(r"\bFunction (\w+Backward)\b", str(exc))
        found = (named.group(1), "backward") if named else None
    return found
