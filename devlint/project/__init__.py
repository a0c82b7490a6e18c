"""Cross-file summaries: what the project's own helpers and classes do, for DEV111-DEV114.

``summary`` (one file -> its summary, stdlib ``ast``), ``resolve`` (an import -> a project
file), ``index`` (summaries kept by content hash, and one linted file's view of them).
:func:`shared_index` is the one index of this process.
"""

from __future__ import annotations

from pathlib import Path

from .index import ENABLED, ProjectIndex, View

_SHARED: dict[str, ProjectIndex] = {}


def shared_index(cache_folder: str | Path | None = None) -> ProjectIndex | None:
    """This process's index (one per cache folder), or ``None`` when ``DEVLINT_NO_PROJECT``
    is set."""
    if not ENABLED:
        return None
    key = str(cache_folder) if cache_folder is not None else ""
    index = _SHARED.get(key)
    if index is None:
        index = _SHARED[key] = ProjectIndex(cache_folder)
    return index


def view_for(path: str, cache_folder: str | Path | None = None) -> View | None:
    """The view of the file at ``path`` through :func:`shared_index` (``None``: no index, or
    no file)."""
    index = shared_index(cache_folder)
    return index.view(path) if index is not None else None


__all__ = ["ProjectIndex", "View", "shared_index", "view_for"]
