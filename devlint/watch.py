"""``devlint check --watch``: wait until a file under the given paths changes.

Uses ``watchfiles`` when it is installed (``pip install watchfiles``: native file-system
events), else polls the modification times of the Python files and notebooks every half
second.
"""

from __future__ import annotations

import os
import time
from typing import Sequence

from .runner import SKIP_DIRS, SOURCE_SUFFIXES


def _snapshot(paths: Sequence[str]) -> dict[str, float]:
    seen: dict[str, float] = {}
    for raw in paths:
        if os.path.isfile(raw):
            candidates = [raw]
        else:
            candidates = []
            for folder, dirs, files in os.walk(raw):
                dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
                candidates.extend(os.path.join(folder, f) for f in files if f.endswith((*SOURCE_SUFFIXES, ".toml", ".gitignore")))
        for path in candidates:
            try:
                seen[path] = os.stat(path).st_mtime_ns
            except OSError:
                pass
    return seen


def changes(paths: Sequence[str], interval: float = 0.5) -> None:
    """Return once a Python file, notebook or configuration under ``paths`` changes."""
    try:
        from watchfiles import watch
    except ImportError:
        watch = None
    if watch is not None and not os.environ.get("DEVLINT_WATCH_POLL"):
        for batch in watch(*paths, raise_interrupt=True):
            if any(p.endswith((*SOURCE_SUFFIXES, ".toml", ".gitignore")) for _, p in batch):
                return
        return
    before = _snapshot(paths)
    while True:
        time.sleep(interval)
        if _snapshot(paths) != before:
            return
