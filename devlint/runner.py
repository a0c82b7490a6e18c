"""Lint many files: discovery, reading, ``# noqa``. The CLI and the language server use it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterable, Sequence

from . import noqa
from .engine import PARSE_ERROR, decode, lint
from .finding import Finding

SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".env", "env", ".tox", ".nox",
             "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".devlint_cache", "site-packages",
             "build", "dist", ".eggs"}


def discover(paths: Sequence[str]) -> Iterable[str]:
    """Files to lint: named files as given; directories recursed for ``*.py``/``*.pyi``,
    skipping VCS folders, virtual environments (any folder holding ``pyvenv.cfg``) and caches."""
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            yield raw
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(
                d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")
                and not os.path.exists(os.path.join(root, d, "pyvenv.cfg"))
            )
            for name in sorted(files):
                if name.endswith((".py", ".pyi")):
                    yield os.path.join(root, name)


def check_source(data: bytes, path: str, select: Sequence[str], ignore: Sequence[str]) -> list[Finding]:
    """Findings of one file's bytes after ``# noqa`` (flake8's semantics)."""
    findings = lint(data, path, select, ignore)
    if not findings:
        return findings
    try:
        text = decode(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return findings
    return noqa.apply(findings, text)


def check_file(path: str, select: Sequence[str], ignore: Sequence[str]) -> list[Finding]:
    """Findings of one file (``-`` is standard input); an unreadable file gives one DEV000."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        return [Finding(path, 1, 0, PARSE_ERROR, f"could not read: {exc.strerror or exc}", 1, 0)]
    return check_source(data, path, select, ignore)


def check_paths(files: Sequence[str], select: Sequence[str] = ("DEV",), ignore: Sequence[str] = ()) -> list[Finding]:
    """Findings of every file, sorted by path, line, column and code."""
    findings: list[Finding] = []
    for path in files:
        findings.extend(check_file(path, select, ignore))
    findings.sort(key=lambda f: (f.path, f.line, f.column, f.code))
    return findings
