"""``path:line:col: CODE message``, one finding a line, as flake8 and ruff print them.

Columns are 1-based; a notebook's findings read ``path:cell N:line:col: CODE message``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..finding import Finding
from ..rule import Rule


def line(finding: Finding) -> str:
    """One finding as a line of text (no newline)."""
    where = f"{finding.path}:cell {finding.cell}" if finding.cell else finding.path
    return f"{where}:{finding.line}:{finding.column + 1}: {finding.code} {finding.message}"


def render(findings: Sequence[Finding], rules: Sequence[type[Rule]], root: Path) -> str:
    """Every finding on its own line (the CLI adds the summary line)."""
    return "".join(line(finding) + "\n" for finding in findings)
