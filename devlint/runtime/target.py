"""Loading a ``devlint runtime`` TARGET: ``path/file.py:NAME`` or ``package.module:NAME``.

NAME is a function taking no arguments that returns a :class:`~.step.TrainingStep` (or a
TrainingStep itself). While the target is imported and NAME() runs, ``sys.path`` holds what
pytest's ``rootdir`` and ``pythonpath = ["src"]`` would give a test of the same project, so a
``src/`` layout's package imports without being installed:

1. the target file's folder (for ``package.module:NAME``, the working directory);
2. the project root: the nearest folder at or above that one holding ``pyproject.toml``,
   ``setup.py``, ``setup.cfg`` or ``.git``;
3. the root's ``src/`` folder, when there is one (for a module target with no project root,
   the working directory's ``src/``).

Folders already on ``sys.path`` are not added twice; the ones added are listed
(:func:`load_target` returns them) and removed afterwards unless the caller keeps them.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings

__all__ = ["TargetError", "load_target", "search_paths", "one_line"]

_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


class TargetError(Exception):
    """The TARGET could not be loaded; the message is one line, ready for the user."""


def one_line(exc: BaseException) -> str:
    """``"TypeName: first line of the message"`` (or just the type name)."""
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _project_root(start: str) -> str | None:
    folder = start
    while True:
        if any(os.path.exists(os.path.join(folder, m)) for m in _ROOT_MARKERS):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def search_paths(start: str) -> list[str]:
    """The folders a target found from ``start`` (absolute) needs on ``sys.path``, in order:
    ``start``, the project root above it, and the root's ``src/`` (see the module docs)."""
    paths = [start]
    root = _project_root(start)
    for folder in ((root, os.path.join(root, "src")) if root else (os.path.join(start, "src"),)):
        if os.path.isdir(folder) and folder not in paths:
            paths.append(folder)
    return paths


def built_under_seed(step) -> bool:
    """True when :func:`load_target` built ``step`` by calling NAME() right after
    ``torch.manual_seed(seed)``; False for a module-level TrainingStep (built at import,
    unseeded) or a step from anywhere else."""
    return bool(getattr(step, "_devlint_seeded", False))


def load_target(target: str, seed: int = 0, keep_path: list | None = None):
    """Load ``path/file.py:NAME`` or ``package.module:NAME`` and call NAME() for a TrainingStep.

    ``torch.manual_seed(seed)`` is set before NAME() is called, so random weights and data are
    reproducible. Returns ``(step, warnings, added)``: the warnings raised while loading and
    the folders put on ``sys.path`` (see the module docs). Pass a list as ``keep_path`` to keep
    those folders on ``sys.path`` afterwards (they are appended to the list; the caller removes
    them), for steps that import lazily while they run.

    Raises:
        TargetError: the target is malformed, missing, fails to import, or NAME() fails or
            returns something other than a TrainingStep.
    """
    source, sep, name = target.rpartition(":")
    if not sep or not source or not name.isidentifier():
        raise TargetError(f"target {target!r} is not path/file.py:NAME or package.module:NAME")
    is_file = source.endswith(".py") or os.sep in source or "/" in source
    spec = module = mod_name = None
    if is_file:
        path = os.path.abspath(source)
        if not os.path.isfile(path):
            raise TargetError(f"file {source} not found")
        mod_name = "_devlint_target_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        start = os.path.dirname(path)
    else:
        start = os.getcwd()
    added = [p for p in search_paths(start) if p not in sys.path]
    sys.path[0:0] = added
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DeprecationWarning)
            warnings.simplefilter("always", FutureWarning)
            step = _load(source, name, target, module, mod_name, spec, seed, added)
        return step, caught, added
    finally:
        if keep_path is not None:
            keep_path.extend(added)
        else:
            for folder in added:
                if folder in sys.path:
                    sys.path.remove(folder)


def _load(source, name, target, module, mod_name, spec, seed, added):
    """Import the target (a file when ``module`` is given) and call NAME(); see load_target."""
    import torch

    from .step import TrainingStep

    if module is not None:
        try:
            sys.modules[mod_name] = module
            spec.loader.exec_module(module)
        except BaseException as exc:  # noqa: BLE001 - any failure becomes one line
            sys.modules.pop(mod_name, None)
            raise TargetError(f"cannot import {source}: {one_line(exc)}") from None
    else:
        try:
            module = importlib.import_module(source)
        except BaseException as exc:  # noqa: BLE001
            where = f" (searched also {', '.join(added)})" if added and isinstance(exc, ImportError) else ""
            raise TargetError(f"cannot import {source}: {one_line(exc)}{where}") from None
    factory = getattr(module, name, None)
    if factory is None:
        raise TargetError(f"{source} has no {name}")
    if isinstance(factory, TrainingStep):
        step = factory
    elif not callable(factory):
        raise TargetError(f"{source}:{name} is a {type(factory).__name__}, not a function "
                          "returning a TrainingStep")
    else:
        torch.manual_seed(seed)
        try:
            step = factory()
        except BaseException as exc:  # noqa: BLE001
            raise TargetError(f"{source}:{name}() raised {one_line(exc)}") from None
    if not isinstance(step, TrainingStep):
        raise TargetError(f"{source}:{name}() returned {type(step).__name__}, not a TrainingStep")
    step._devlint_seeded = step is not factory  # NAME() ran under the seed; a module-level step did not
    model_class = type(step.model).__name__
    if step.name == model_class:
        step.name = f"{target} ({model_class})"
    return step
