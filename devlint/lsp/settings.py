"""Each open file's ``[tool.devlint]`` settings, found and re-read as ``devlint check`` finds them."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..config import Config, ConfigError, find as find_config, load as load_config
from ..runner import SKIP_DIRS, is_excluded


class Settings:
    """``[tool.devlint]`` per file, found as the CLI finds it (the nearest ``pyproject.toml``
    holding the table, from the file's folder upwards) and read again when any
    ``pyproject.toml`` on that way changes (checked with ``stat`` on every lint).

    Safe to share between threads (the lint thread reads it, the protocol thread clears it)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple, Config, str | None]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _signature(folder: Path) -> tuple:
        found = []
        for parent in (folder, *folder.parents):
            try:
                stat = (parent / "pyproject.toml").stat()
            except OSError:
                continue
            found.append((str(parent), stat.st_mtime_ns, stat.st_size))
        return tuple(found)

    def for_path(self, path: str) -> tuple[Config, str | None]:
        """(the configuration of ``path``, an error message when its table was just read and
        is unreadable or invalid; the defaults are used then)."""
        folder = Path(os.path.abspath(path)).parent
        signature = self._signature(folder)
        with self._lock:
            cached = self._cache.get(str(folder))
        if cached is not None and cached[0] == signature:
            return cached[1], None  # an error is told once, when the file is read
        error = None
        try:
            found = find_config(folder)
            config = load_config(found) if found is not None else Config(root=folder)
        except (ConfigError, OSError) as exc:
            config, error = Config(root=folder), str(exc)
        with self._lock:
            self._cache[str(folder)] = (signature, config, error)
        return config, error

    def clear(self) -> None:
        """Forget every cached table (a watched ``pyproject.toml`` changed)."""
        with self._lock:
            self._cache.clear()


def excluded(path: str, config: Config) -> bool:
    """Does ``exclude``/``extend-exclude`` (or, without ``exclude``, the default folders such
    as ``.venv``) cover ``path``?"""
    patterns = [*(config.exclude if config.exclude is not None else sorted(SKIP_DIRS)), *config.extend_exclude]
    return is_excluded(path, patterns, config.root)
