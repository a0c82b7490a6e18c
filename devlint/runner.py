"""Lint many files: discovery, reading, ``# noqa``. The CLI and the language server use it."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Callable, Iterable, Sequence

from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial

from . import noqa, notebook
from .cache import Cache
from .config import path_matches
from .engine import lint
from .finding import PARSE_ERROR, Finding
from .source import decode

SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".env", "env", ".tox", ".nox",
             "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".devlint_cache", "site-packages",
             "build", "dist", ".eggs"}


def is_excluded(path: str, patterns: Sequence[str], root: Path | None = None) -> bool:
    """Does any glob in ``patterns`` match ``path`` (relative to ``root``, absolute, or its
    name) or one of its folders below ``root``?"""
    if not patterns or path == "-":
        return False
    root = Path(os.path.abspath(root or os.getcwd()))
    current = Path(os.path.abspath(path))
    while True:
        if any(path_matches(current, pattern, root) for pattern in patterns):
            return True
        if current.parent == current or current.parent == root or root not in current.parents:
            return False
        current = current.parent


#: What a folder search lints: Python sources, stubs and Jupyter notebooks (as ruff does).
SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb")


def display_path(path: str) -> str:
    """How every output format names a file: relative to the current folder when inside it
    (never with a ``./`` prefix), else absolute; ``-`` stays ``-``."""
    if path == "-":
        return path
    absolute = os.path.abspath(path)
    here = os.getcwd()
    if absolute == here or absolute.startswith(here.rstrip(os.sep) + os.sep):
        return os.path.relpath(absolute, here).replace(os.sep, "/")
    return absolute.replace(os.sep, "/") if os.sep != "/" else absolute


class GitIgnore:
    """``.gitignore`` files met while searching folders, matched with ``pathspec`` (git's
    own rules: negation, anchoring, ``dir/`` patterns). The files of the folders above a
    search root count up to the repository's top (the folder holding ``.git``)."""

    def __init__(self) -> None:
        self._specs: dict[str, object | None] = {}

    def _spec(self, folder: str):
        if folder not in self._specs:
            spec = None
            for name in (".gitignore", os.path.join(".git", "info", "exclude")):
                try:
                    with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as handle:
                        lines = handle.read().splitlines()
                except OSError:
                    continue
                import pathspec

                part = pathspec.GitIgnoreSpec.from_lines(lines)
                spec = part if spec is None else spec + part
            self._specs[folder] = spec
        return self._specs[folder]

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Is ``path`` ignored by a ``.gitignore`` in one of its folders (up to the repository)?"""
        absolute = os.path.abspath(path)
        folder = os.path.dirname(absolute)
        while True:
            spec = self._spec(folder)
            if spec is not None:
                relative = os.path.relpath(absolute, folder).replace(os.sep, "/") + ("/" if is_dir else "")
                result = spec.check_file(relative)  # the last matching pattern decides, as in git
                if result.include is not None:
                    return bool(result.include)
            if os.path.exists(os.path.join(folder, ".git")) or os.path.dirname(folder) == folder:
                return False
            folder = os.path.dirname(folder)


def discover(
    paths: Sequence[str],
    *,
    exclude: Sequence[str] | None = None,
    extend_exclude: Sequence[str] = (),
    root: Path | None = None,
    force_exclude: bool = False,
    config_for: Callable[[str], object] | None = None,
    respect_gitignore: bool = False,
) -> Iterable[str]:
    """Files to lint: named files as given; directories recursed for ``*.py``, ``*.pyi`` and
    ``*.ipynb``, skipping VCS folders, virtual environments (any folder holding
    ``pyvenv.cfg``) and caches.

    ``exclude`` (glob patterns; ``None`` keeps the default folders above) and
    ``extend_exclude`` skip matching files and folders during the search, matched relative to
    ``root``; a file named on the command line is linted anyway unless ``force_exclude``, and
    so is a folder named there that ``.gitignore`` hides (what is inside it, all of it).
    ``config_for(folder)``, when given, supplies those three per folder instead (the nearest
    ``[tool.devlint]``: :class:`devlint.config.Resolver`). ``respect_gitignore`` skips what
    ``.gitignore`` files ignore (where that configuration does not turn it off)."""
    gitignore = GitIgnore()

    def settings(folder: str):
        if config_for is None:
            return [*(exclude or ()), *extend_exclude], (SKIP_DIRS if exclude is None else set()), exclude is None, root, respect_gitignore
        config = config_for(folder)
        patterns = [*(config.exclude or ()), *config.extend_exclude]
        keep = respect_gitignore and config.respect_gitignore
        return patterns, (SKIP_DIRS if config.exclude is None else set()), config.exclude is None, config.root, keep

    for raw in paths:
        path = Path(raw)
        is_dir = raw != "-" and os.path.isdir(path)  # never raises, even for a path it cannot see
        patterns, skip_dirs, defaults, base, ignore_git = settings(raw if is_dir else str(path.parent))
        if not is_dir:
            if not (force_exclude and (is_excluded(raw, patterns, base) or (ignore_git and gitignore.ignored(raw, False)))):
                yield raw
            continue
        if force_exclude and is_excluded(raw, patterns, base):
            continue
        # a folder named on the command line that .gitignore hides is linted, as ruff does
        named_hidden = ignore_git and not force_exclude and gitignore.ignored(raw, True)
        unreadable: list[str] = []  # a folder that cannot be listed is yielded: reading it reports why
        for folder, dirs, files in os.walk(path, onerror=lambda exc: unreadable.append(exc.filename)):
            yield from unreadable
            unreadable.clear()
            patterns, skip_dirs, defaults, base, ignore_git = settings(folder)
            ignore_git = ignore_git and not named_hidden
            base = base or Path.cwd()
            dirs[:] = sorted(
                d for d in dirs if d not in skip_dirs and not (defaults and d.endswith(".egg-info"))
                and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))
                and not (patterns and any(path_matches(os.path.join(folder, d), p, base) for p in patterns))
                and not (ignore_git and gitignore.ignored(os.path.join(folder, d), True))
            )
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    full = os.path.join(folder, name)
                    if not os.path.isfile(full):  # a FIFO, socket or device named *.py: reading it could hang
                        continue
                    if not (patterns and any(path_matches(full, p, base) for p in patterns)) \
                            and not (ignore_git and gitignore.ignored(full, False)):
                        yield full
        yield from unreadable


def check_source(data: bytes, path: str, select: Sequence[str], ignore: Sequence[str], project=None) -> list[Finding]:
    """Findings of one file's bytes after ``# noqa`` (flake8's semantics); ``project``: the
    file's :class:`devlint.project.index.View`, or ``None`` to lint it alone."""
    findings = lint(data, path, select, ignore, project=project)
    if not findings:
        return findings
    try:
        text = decode(data).text
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return findings
    return noqa.apply(findings, text)


def check_text(text: str, path: str, select: Sequence[str], ignore: Sequence[str]) -> list[Finding]:
    """Findings of already decoded text after ``# noqa``: columns count code points of
    ``text`` whatever encoding the file is stored in."""
    findings = lint(text, path, select, ignore)
    return noqa.apply(findings, text) if findings else findings


class NotARegularFile(OSError):
    """The path names a FIFO, socket, device or folder, which devlint does not read."""


def read_file(path: str) -> bytes:
    """The bytes of a regular file (``-``: standard input). Raises ``OSError`` (a
    :class:`NotARegularFile` for a FIFO, device or folder) without ever blocking on one."""
    if path == "-":
        return sys.stdin.buffer.read()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            with os.scandir(path):  # a folder the walk could not list: say why
                pass
            raise NotARegularFile(0, "a folder, not a file")
        if not stat.S_ISREG(mode):
            raise NotARegularFile(0, f"{'a FIFO' if stat.S_ISFIFO(mode) else 'a device or socket'}, not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_file(path: str, select: Sequence[str], ignore: Sequence[str], project=None) -> list[Finding]:
    """Findings of one file (``-`` is standard input); an unreadable file gives one DEV000.
    ``project`` is as for :func:`check_source`."""
    try:
        data = read_file(path)
    except OSError as exc:
        return [Finding(path, 1, 0, PARSE_ERROR, f"could not read: {exc.strerror or exc}", 1, 0)]
    if path.endswith(".ipynb"):
        return notebook.check(data, path, check_source, select, ignore)
    return check_source(data, path, select, ignore, project)


def _view(path: str, cache: Cache | None):
    """The file's view of the project (:mod:`devlint.project`), its summaries kept beside the
    findings cache; ``None`` for standard input, a notebook, or with ``DEVLINT_NO_PROJECT``."""
    if path == "-" or path.endswith(".ipynb"):
        return None
    from .project import view_for

    return view_for(path, cache.folder if cache is not None else None)


def _check_one(path: str, select: Sequence[str], ignore: Sequence[str], cache: Cache | None) -> list[Finding]:
    view = _view(path, cache)
    if cache is None or path == "-":
        return check_file(path, select, ignore, view)
    try:
        data = read_file(path)
    except OSError:
        return check_file(path, select, ignore, view)
    key = cache.key(path, data)
    findings = cache.get(key, view.index.digest if view is not None else None)
    if findings is None:
        findings = notebook.check(data, path, check_source, select, ignore) if path.endswith(".ipynb") \
            else check_source(data, path, select, ignore, view)
        cache.put(key, findings, view.deps if view is not None else None)
    return findings


def check_paths(
    files: Sequence[str],
    select: Sequence[str] = ("DEV",),
    ignore: Sequence[str] = (),
    *,
    jobs: int = 1,
    cache: Cache | None = None,
) -> list[Finding]:
    """Findings of every file, sorted by path, line, column and code.

    ``jobs`` > 1 lints in that many worker processes (standard input is always read here);
    ``cache`` serves and stores findings by file content (:mod:`devlint.cache`)."""
    work = partial(_check_one, select=select, ignore=ignore, cache=cache)
    findings: list[Finding] = []
    if jobs > 1 and len(files) >= 2 * jobs and "-" not in files:
        try:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                for result in pool.map(work, files, chunksize=max(1, min(16, len(files) // (4 * jobs)))):
                    findings.extend(result)
        except (OSError, BrokenProcessPool):  # no processes here (a sandbox): run serially
            findings = [f for path in files for f in work(path)]
    else:
        for path in files:
            findings.extend(work(path))
    findings.sort(key=lambda f: (f.path, f.cell or 0, f.line, f.column, f.code))
    return findings
