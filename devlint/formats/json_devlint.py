"""``--output-format json-devlint``: devlint's own JSON schema (``json`` before issue 23; the
``json`` format now follows ruff's, :mod:`devlint.formats.json`), a list of ``{code, message,
path, line, column, end_line, end_column, fix}``.

Lines and columns are 1-based, as in the text output; ``end_column`` is the column just past
the flagged code. ``path`` is the path as linted. A notebook's findings also carry ``cell``
(1-based, code cells only), and their lines count from the top of that cell. ``fix`` is
``null`` or ``{message, applicability, edits: [{content, line, column, end_line, end_column}]}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..finding import Finding
from .fields import end_of

if TYPE_CHECKING:  # annotations only: the rules (and libcst) are not loaded to write a report
    from ..rule import Rule


def _fix(finding: Finding) -> dict[str, Any] | None:
    fix = finding.fix
    if fix is None:
        return None
    return {
        "message": fix.description,
        "applicability": "safe" if fix.safe else "unsafe",
        "edits": [
            {"content": e.text, "line": e.line, "column": e.column + 1, "end_line": e.end_line, "end_column": e.end_column + 1}
            for e in fix.edits
        ],
    }


def record(finding: Finding) -> dict[str, Any]:
    """One finding as a JSON-ready dict."""
    end_line, end_column = end_of(finding)
    item: dict[str, Any] = {
        "code": finding.code,
        "message": finding.message,
        "path": finding.path,
        "line": finding.line,
        "column": finding.column + 1,
        "end_line": end_line,
        "end_column": end_column + 1,
        "fix": _fix(finding),
    }
    if finding.cell is not None:
        item["cell"] = finding.cell
    return item


def render(findings: Sequence[Finding], rules: Sequence[type[Rule]], root: Path) -> str:
    """The findings as an indented JSON array."""
    return json.dumps([record(f) for f in findings], indent=2) + "\n"
