"""``[tool.devlint]`` in the nearest ``pyproject.toml``, for the CLI.

```toml
[tool.devlint]
select = ["DEV"]                 # code prefixes (default: every DEV code)
extend-select = ["DEV2"]
ignore = ["DEV103"]
per-file-ignores = { "tests/*" = ["DEV101", "DEV102"] }
exclude = [".git", "build"]      # replaces the default list of skipped folders
extend-exclude = ["legacy", "*_pb2.py"]
respect-gitignore = true         # skip what .gitignore files ignore while searching folders
torch-version = "2.6"            # the oldest torch the code supports: fixes may use torch.accelerator
target-version = "py310"         # the oldest Python it runs on: syntax that one refuses is DEV000
```

Each file gets the nearest ``pyproject.toml`` *with a* ``[tool.devlint]`` table above it, as
ruff does, so a monorepo's packages keep their own settings (``--config FILE`` instead
applies one file's settings to every file). A ``pyproject.toml`` that is not valid TOML is an
error naming the file and line; codes that name no rule are errors too. ``ALL`` selects every
code. Patterns are globs matched
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

from .syntax import parse_target

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

KEYS = ("select", "extend-select", "ignore", "per-file-ignores", "exclude", "extend-exclude",
        "respect-gitignore", "torch-version", "target-version")


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
    respect_gitignore: bool = True
    #: (major, minor) of the oldest torch the code supports, or ``None`` (no assumption)
    torch_version: tuple[int, int] | None = None
    target_version: tuple[int, int] | None = None

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
            return _all([*select, *extend_select]), list(ignore)
        chosen = _all([*(self.select or ["DEV"]), *self.extend_select, *extend_select])
        kept = [code for code in self.ignore if not code.startswith(tuple(extend_select))] if extend_select else list(self.ignore)
        return chosen, [*kept, *ignore]

    def ignored_codes(self, path: str) -> list[str]:
        """The code prefixes ``per-file-ignores`` drops for ``path``."""
        codes: list[str] = []
        for pattern, ignored in self.per_file_ignores.items():
            if path_matches(path, pattern, self.root):
                codes.extend(ignored)
        return codes


def _all(codes: list[str]) -> list[str]:
    """``ALL`` is every code: the ``DEV`` prefix."""
    return ["DEV" if code == "ALL" else code for code in codes]


def known(code: str) -> bool:
    """Does the selector ``code`` (a code or prefix, or ``ALL``) name at least one code?"""
    from .finding import PARSE_ERROR
    from .rules import all_rules

    if code == "ALL":
        return True
    return any(c.startswith(code) for c in (PARSE_ERROR, *(r.code for r in all_rules())))


def check_codes(codes: Sequence[str], where: str) -> None:
    """Raise :class:`ConfigError` for the first selector that names no code."""
    for code in codes:
        if not known(code):
            raise ConfigError(f"{where}: unknown rule selector {code!r} ({code_range()}: "
                              "`devlint rule --all` lists them)")


def code_range() -> str:
    """The codes that exist, in words for an error message: ``"codes are DEV000 and DEV101
    to DEV210"`` (the lowest and highest rule code, read from the registered rules)."""
    from .finding import PARSE_ERROR
    from .rules import all_rules

    codes = sorted(r.code for r in all_rules())
    return f"codes are {PARSE_ERROR} and {codes[0]} to {codes[-1]}"


def _caret(path: Path, message: str) -> str:
    """The line a TOML error names, with a caret under its column, as ruff shows it (empty
    when the message names no line or the file cannot be read again)."""
    import re

    where = re.search(r"line (\d+)(?:, column (\d+))?", message)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    if not where or not lines:
        return ""
    row = min(int(where.group(1)), len(lines))
    column = int(where.group(2) or 1)
    gutter = " " * len(str(row))
    return f"\n {gutter} |\n {row} | {lines[row - 1]}\n {gutter} | {' ' * (column - 1)}^"


def _read(path: Path) -> dict:
    """A TOML file's document; a file that is not valid TOML raises :class:`ConfigError`
    with the file, line and column."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        if "line" not in message:  # "(at end of document)": name the last line
            try:
                message += f" (line {max(1, len(path.read_bytes().splitlines()))}, the end of the file)"
            except OSError:
                pass
        raise ConfigError(f"{path}: not valid TOML: {message}{_caret(path, message)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None


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


def find(start: str | os.PathLike | None = None, cache: dict | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` holding ``[tool.devlint]``, from ``start`` upwards
    (raises :class:`ConfigError` for one that is not valid TOML). ``cache`` maps folders
    already searched to their answer."""
    here = Path(os.path.abspath(start or os.getcwd()))
    if not os.path.isdir(here):  # never raises, even where a folder cannot be searched
        here = here.parent
    seen = []
    found = None
    for folder in (here, *here.parents):
        if cache is not None and folder in cache:
            found = cache[folder]
            break
        seen.append(folder)
        found = _holder(folder)
        if found is not None:
            break
    if cache is not None:
        cache.update(dict.fromkeys(seen, found) if found is None else {f: found for f in seen})
    return found


def _holder(folder: Path) -> Path | None:
    """``folder/pyproject.toml`` if it holds ``[tool.devlint]`` (raises :class:`ConfigError`
    if it is not valid TOML)."""
    candidate = folder / "pyproject.toml"
    try:  # a file that cannot be read (permissions, a folder by that name) is passed over
        with candidate.open("rb"):
            pass
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        print(f"devlint: warning: could not read {candidate}: {exc.strerror or exc}; its settings are not used",
              file=sys.stderr)
        return None
    document = _read(candidate)
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


def inline(text: str) -> Config:
    """Settings given as TOML on the command line (``--config "select = ['DEV1']"``)."""
    import tempfile

    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config {text!r}: neither a file nor valid TOML: {exc}") from None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "devlint.toml"
        path.write_text(text, encoding="utf-8")
        config = load(path)
    config.root, config.path = Path(os.getcwd()), None
    return config


def load(path: str | os.PathLike) -> Config:
    """The ``[tool.devlint]`` table of one ``pyproject.toml`` (raises :class:`ConfigError`)."""
    path = Path(os.path.abspath(path))
    document = _read(path)
    tool = document.get("tool", {})
    if path.name != "pyproject.toml" and not (isinstance(tool, dict) and "devlint" in tool):
        table = document  # a devlint.toml given to --config: the keys at the top level
    else:
        table = tool.get("devlint", {}) if isinstance(tool, dict) else {}
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
        for key, codes in (("select", config.select or []), ("extend-select", config.extend_select), ("ignore", config.ignore),
                           *((f"per-file-ignores[{g!r}]", c) for g, c in config.per_file_ignores.items())):
            check_codes(codes, key)
        if "respect-gitignore" in table:
            if not isinstance(table["respect-gitignore"], bool):
                raise ConfigError(f"respect-gitignore must be true or false, got {table['respect-gitignore']!r}")
            config.respect_gitignore = table["respect-gitignore"]
        if "torch-version" in table:
            config.torch_version = parse_version(table["torch-version"])
        if "target-version" in table:
            try:
                config.target_version = parse_target(table["target-version"])
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
    except ConfigError as exc:
        raise ConfigError(f"{path}: [tool.devlint] {exc}") from None
    return config


def parse_version(value: Any) -> tuple[int, int]:
    """``"2.6"`` / ``"2.6.0"`` -> ``(2, 6)`` (raises :class:`ConfigError`)."""
    parts = str(value).strip().split(".")
    try:
        if not isinstance(value, (str, int, float)) or len(parts) < 2:
            raise ValueError
        return int(parts[0]), int(parts[1])
    except ValueError:
        raise ConfigError(f"torch-version must look like \"2.6\", got {value!r}") from None


class Resolver:
    """The configuration of each file: ``explicit`` (``--config FILE``) for all, nothing with
    ``isolated``, else the nearest ``[tool.devlint]`` above the file (cached per folder)."""

    def __init__(self, explicit: str | os.PathLike | None = None, isolated: bool = False) -> None:
        self.default = Config(root=Path(os.getcwd()))
        if explicit and not os.path.exists(explicit) and "=" in str(explicit):
            self.fixed = inline(str(explicit))  # --config "ignore = ['DEV104']", as ruff allows
        else:
            self.fixed = load(explicit) if explicit else (self.default if isolated else None)
        self._loaded: dict[Path, Config] = {}
        self._folders: dict[Path, Path | None] = {}

    def __call__(self, path: str | os.PathLike) -> Config:
        """The configuration for a file or folder (raises :class:`ConfigError`)."""
        if self.fixed is not None:
            return self.fixed
        found = find(path, self._folders)
        if found is None:
            return self.default
        if found not in self._loaded:
            self._loaded[found] = load(found)
        return self._loaded[found]


def resolve(paths: Sequence[str] = (), isolated: bool = False) -> Config:
    """The configuration for a run over ``paths``: the nearest table from the first real path
    (or the current folder), or defaults rooted at the current folder."""
    if not isolated:
        start = next((p for p in paths if p != "-"), None)
        found = find(start)
        if found is not None:
            return load(found)
    return Config(root=Path(os.getcwd()))
