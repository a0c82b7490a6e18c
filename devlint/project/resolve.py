"""Which file of the project an import names, as Python's import system would find it.

A relative import (``from .utils import f``, ``from .. import data``) is looked up from the
importing file's folder, one level up per extra dot. An absolute one (``import utils``,
``from pkg.mod import f``, ``import pkg.mod as m``) is looked up in the importing file's
folder (a script's folder is first on ``sys.path``), then in each folder above it up to the
project root, then in ``<root>/src``. A module is ``a/b.py`` or the package ``a/b/__init__.py``.
Standard-library and torch names are never looked up; a name that matches no file of the
project is not the project's (an installed package), and the rules know nothing of it.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path

#: Files that mark a project's root folder (the nearest one above a linted file).
ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
_SKIPPED = frozenset(getattr(sys, "stdlib_module_names", ())) | {"torch", "torchvision", "numpy", "__future__"}


@lru_cache(maxsize=4096)
def project_root(folder: str) -> str:
    """The nearest folder at or above ``folder`` holding a :data:`ROOT_MARKERS` entry, else
    the folder above the outermost package holding ``folder`` (a lone script's own folder)."""
    here = Path(folder)
    for candidate in (here, *here.parents):
        if any(os.path.exists(candidate / marker) for marker in ROOT_MARKERS):
            return str(candidate)
    while (here / "__init__.py").exists() and here.parent != here:
        here = here.parent
    return str(here)


def _module_at(base: str, parts: list[str]) -> str | None:
    if not parts:
        init = os.path.join(base, "__init__.py")
        return init if os.path.isfile(init) else None
    stem = os.path.join(base, *parts)
    if os.path.isfile(stem + ".py"):
        return stem + ".py"
    init = os.path.join(stem, "__init__.py")
    return init if os.path.isfile(init) else None


@lru_cache(maxsize=16384)
def module_file(importer_folder: str, root: str, level: int, module: str) -> str | None:
    """The project file of ``module`` imported from a file in ``importer_folder`` (``level``:
    the dots of a relative import), or ``None``. Lookups are memoised for the process: a
    file created while a long-lived server runs is found once ``clear()`` is called."""
    parts = [p for p in module.split(".") if p]
    if level:
        base = importer_folder
        for _ in range(level - 1):
            base = os.path.dirname(base)
        if not base.startswith(root):
            return None
        return _module_at(base, parts)
    if not parts or parts[0] in _SKIPPED:
        return None
    bases = [importer_folder]
    folder = importer_folder
    while folder.startswith(root) and folder != root:
        folder = os.path.dirname(folder)
        bases.append(folder)
    bases.append(os.path.join(root, "src"))
    for base in bases:
        found = _module_at(base, parts)
        if found is not None:
            return found
    return None


def clear() -> None:
    """Forget memoised lookups (files were created or removed)."""
    module_file.cache_clear()
    project_root.cache_clear()
