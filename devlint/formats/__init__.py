"""Output formats of ``devlint check --format``: one module per format, each with a
``render(findings, rules, root) -> str`` function.

``findings`` are the findings to report (``# noqa`` already applied), ``rules`` the rule
classes that ran, ``root`` the folder that machine-readable paths are made relative to (the
repository: SARIF, GitHub and GitLab want repository-relative paths).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..finding import Finding

if TYPE_CHECKING:  # annotations only: the rules (and libcst) are not loaded to write a report
    from ..rule import Rule

Renderer = Callable[[Sequence[Finding], Sequence["type[Rule]"], Path], str]

#: The format names ``--output-format`` accepts, in the order ``--help`` lists them.
NAMES = ("full", "concise", "json", "json-devlint", "sarif", "github", "gitlab")
#: Older names still accepted: ``text`` is the one-line-a-finding format.
ALIASES = {"text": "concise"}
#: Source text of files that are not on disk as linted (standard input), by path.
SOURCES: dict[str, str] = {}


def get(name: str) -> Renderer:
    """The ``render`` function of the format called ``name`` (raises ``KeyError``)."""
    name = ALIASES.get(name, name)
    if name not in NAMES:
        raise KeyError(name)
    from importlib import import_module

    if name in ("full", "concise"):
        from functools import partial

        from .text import render

        return partial(render, full=name == "full")
    return import_module(f"{__name__}.{name.replace('-', '_')}").render


def relative_path(path: str, root: Path) -> str:
    """``path`` relative to ``root`` with ``/`` separators, or absolute when outside it."""
    if path == "-":
        return path
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path(os.path.abspath(root))).as_posix()
    except ValueError:
        return absolute.as_posix()


def end_of(finding: Finding) -> tuple[int, int]:
    """(end line, 0-based end column) of a finding; a finding without an end ends where it starts."""
    if finding.end_line:
        return finding.end_line, finding.end_column
    return finding.line, finding.column


def described(finding: Finding) -> str:
    """The message, led by ``cell N:`` for a notebook (whose line numbers count from its cell)."""
    return f"cell {finding.cell}: {finding.message}" if finding.cell else finding.message


@lru_cache(maxsize=256)
def _lines(path: str, cell: int | None) -> tuple[str, ...]:
    if path in SOURCES:
        data = SOURCES[path].encode("utf-8")
        if cell is not None:
            from ..notebook import cell_lines

            return tuple(cell_lines(data, cell))
        from ..source import split_lines

        return tuple(split_lines(SOURCES[path]))
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ()
    if b"\x00" in data:  # a binary file: no raw bytes on the terminal
        return ()
    if cell is not None:
        from ..notebook import cell_lines

        return tuple(cell_lines(data, cell))
    from ..source import decode, split_lines

    try:
        return tuple(split_lines(decode(data).text))
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return tuple(split_lines(data.decode("utf-8", "replace")))


def source_line(finding: Finding) -> str | None:
    """The text of the line a finding starts on, read from its file (``None`` if unreadable)."""
    lines = source_lines(finding)
    return lines[finding.line - 1] if 0 < finding.line <= len(lines) else None


def source_lines(finding: Finding) -> tuple[str, ...]:
    """The lines of the file (or notebook cell) a finding is in; ``()`` if unreadable."""
    if finding.path == "-" and "-" not in SOURCES:
        return ()
    return _lines(finding.path, finding.cell)
