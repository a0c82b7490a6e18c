"""``[tool.devlint]`` in the nearest ``pyproject.toml``, for the CLI.

```toml
[tool.devlint]
select = ["DEV"]                 # code prefixes (default: every DEV code)
extend-select = ["DEV2"]
ignore = ["DEV103"]
per-file-ignores = { "tests/*" = ["DEV101", "DEV102"] }
exclude = [".git", "build"]      # replaces the default list of skipped folders
extend-exclude = ["legacy", "*_pb2.py"]
```

The nearest ``pyproject.toml`` *with a* ``[tool.devlint]`` table wins, searching upwards from
the first path given (or the current folder), as ruff does. Patterns are globs matched
against the path relative to that file's folder and against the file or folder name alone.
Command-line flags win over the file: ``--select`` starts the selection afresh, and
``--extend-select`` re-enables codes the file ignores. The flake8 plugin never reads this
table (flake8 has its own configuration).
"""

from __future__ import annotations

import fnmatch
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

KEYS = ("select", "extend-select", "ignore", "per-file-ignores", "exclude", "extend-exclude")


class ConfigError(ValueError):
    """``[tool.devlint]`` cannot be read or holds a bad value."""


@dataclass
class Config:
    """The settings of one ``[tool.devlint]`` table; ``path`` is ``None`` when there is none.

    ``root`` is the folder patterns are relative to: the ``pyproject.toml``'s folder, or the
    current folder without one. ``exclude`` is ``None`` when the file does not set it (the
    runner's default folders are skipped)."""

    root: Path
    path: Path | None = None
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)

    def selection(
        self,
        select: Sequence[str] | None = None,
        extend_select: Sequence[str] = (),
        ignore: Sequence[str] = (),
    ) -> tuple[list[str], list[str]]:
        """(select, ignore) code prefixes after the command line's flags are laid over the file.

        A command-line ``--select`` discards the file's selection and ignores; otherwise the
        file's ``ignore`` entries that a command-line ``--extend-select`` covers are dropped."""
        if select:
            return [*select, *extend_select], list(ignore)
        chosen = [*(self.select or ["DEV"]), *self.extend_select, *extend_select]
        kept = [code for code in self.ignore if not code.startswith(tuple(extend_select))] if extend_select else list(self.ignore)
        return chosen, [*kept, *ignore]

    def ignored_codes(self, path: str) -> list[str]:
        """The code prefixes ``per-file-ignores`` drops for ``path``."""
        codes: list[str] = []
        for pattern, ignored in self.per_file_ignores.items():
            if path_matches(path, pattern, self.root):
                codes.extend(ignored)
        return codes


def _candidates(path: str | os.PathLike, root: Path) -> list[str]:
    absolute = Path(os.path.abspath(path))
    names = [absolute.as_posix(), absolute.name]
    try:
        names.insert(0, absolute.relative_to(root.absolute()).as_posix())
    except ValueError:
        pass
    return names


def path_matches(path: str | os.PathLike, pattern: str, root: Path) -> bool:
    """Does the glob ``pattern`` match ``path``: relative to ``root``, absolute, or its name?

    ``*`` also matches ``/`` (``tests/*`` covers ``tests/unit/test_a.py``)."""
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.rstrip("/") or pattern
    return any(fnmatch.fnmatchcase(name, pattern) for name in _candidates(path, root))


def find(start: str | os.PathLike | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` holding ``[tool.devlint]``, from ``start`` upwards."""
    here = Path(os.path.abspath(start or os.getcwd()))
    if not here.is_dir():
        here = here.parent
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                with candidate.open("rb") as handle:
                    document = tomllib.load(handle)
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
                continue
            if isinstance(document.get("tool"), dict) and "devlint" in document["tool"]:
                return candidate
    return None


def _codes(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of code prefixes, got {value!r}")
    return [v.strip().upper() for v in value if v.strip()]


def _patterns(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of glob patterns, got {value!r}")
    return list(value)


def load(path: str | os.PathLike) -> Config:
    """The ``[tool.devlint]`` table of one ``pyproject.toml`` (raises :class:`ConfigError`)."""
    path = Path(os.path.abspath(path))
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    table = document.get("tool", {}).get("devlint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.devlint] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} in [tool.devlint] (known: {', '.join(KEYS)})")
    config = Config(root=path.parent, path=path)
    try:
        if "select" in table:
            config.select = _codes(table["select"], "select")
        config.extend_select = _codes(table.get("extend-select", []), "extend-select")
        config.ignore = _codes(table.get("ignore", []), "ignore")
        if "exclude" in table:
            config.exclude = _patterns(table["exclude"], "exclude")
        config.extend_exclude = _patterns(table.get("extend-exclude", []), "extend-exclude")
        per_file = table.get("per-file-ignores", {})
        if not isinstance(per_file, dict):
            raise ConfigError(f"per-file-ignores must be a table of glob = [codes], got {per_file!r}")
        config.per_file_ignores = {glob: _codes(codes, f"per-file-ignores[{glob!r}]") for glob, codes in per_file.items()}
    except ConfigError as exc:
        raise ConfigError(f"{path}: [tool.devlint] {exc}") from None
    return config


def resolve(paths: Sequence[str] = (), isolated: bool = False) -> Config:
    """The configuration for a run over ``paths``: the nearest table from the first real path
    (or the current folder), or defaults rooted at the current folder."""
    if not isolated:
        start = next((p for p in paths if p != "-"), None)
        found = find(start)
        if found is not None:
            return load(found)
    return Config(root=Path(os.getcwd()))
