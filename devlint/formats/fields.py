"""What several formats write of a finding: its path relative to the report's root, where it
ends, its message (led by its notebook cell)."""

from __future__ import annotations

import os
from pathlib import Path

from ..finding import Finding


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
