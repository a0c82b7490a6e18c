"""``--output-format json``: ruff's JSON schema, so tools written for ``ruff check
--output-format json`` read devlint's findings as they are.

A list, one object per finding, with ruff's field names and nesting::

    {"cell": null, "code": "DEV102", "end_location": {"column": 22, "row": 5},
     "filename": "/abs/path/train.py",
     "fix": {"applicability": "unsafe", "message": "use .to(device)",
             "edits": [{"content": ".to(device)", "location": {...}, "end_location": {...}}]},
     "location": {"column": 11, "row": 5}, "message": "...", "noqa_row": 5, "url": null}

Rows and columns are 1-based; ``end_location`` is just past the flagged code; ``filename`` is
absolute (``-`` for standard input), as ruff writes it. A notebook's finding has ``cell``
(1-based, all cells counted) and rows counted within that cell, its fix edits too.
``noqa_row`` is the line a ``# noqa`` must sit on; ``url`` links to the rule's docs only where
a published page exists (:mod:`devlint.links`). devlint's earlier schema is
``--output-format json-devlint``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..finding import PARSE_ERROR, Finding
from ..links import rule_docs_url
from .fields import end_of

if TYPE_CHECKING:  # annotations only: the rules (and libcst) are not loaded to write a report
    from ..rule import Rule


def _at(row: int, column: int) -> dict[str, int]:
    return {"column": column + 1, "row": row}


def _fix(finding: Finding) -> dict[str, Any] | None:
    fix = finding.fix
    if fix is None:
        return None
    return {
        "applicability": "safe" if fix.safe else "unsafe",
        "edits": [{"content": e.text, "end_location": _at(e.end_line, e.end_column), "location": _at(e.line, e.column)}
                  for e in fix.edits],
        "message": fix.description,
    }


def record(finding: Finding) -> dict[str, Any]:
    """One finding as ruff writes one."""
    end_line, end_column = end_of(finding)
    return {
        "cell": finding.cell,
        "code": finding.code,
        "end_location": _at(end_line, end_column),
        "filename": finding.path if finding.path == "-" else os.path.abspath(finding.path),
        "fix": _fix(finding),
        "location": _at(finding.line, finding.column),
        "message": finding.message,
        "noqa_row": finding.line,
        "url": None if finding.code == PARSE_ERROR else rule_docs_url(finding.code),
    }


def render(findings: Sequence[Finding], rules: Sequence[type[Rule]], root: Path) -> str:
    """The findings as an indented JSON array."""
    return json.dumps([record(f) for f in findings], indent=2) + "\n"
