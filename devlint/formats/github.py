"""GitHub Actions workflow commands: one ``::warning`` annotation per finding.

``::warning file=PATH,line=L,col=C,endLine=L,endColumn=C,title=DEV101::message``, with the
path relative to the repository and 1-based columns. Values are escaped by GitHub's rules
(``@actions/core``): ``%``, CR and LF in the message, and also ``:`` and ``,`` in properties.
DEV000 (a file that could not be read or parsed) is an ``::error``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ..finding import PARSE_ERROR, Finding
from .fields import described, end_of, relative_path

if TYPE_CHECKING:  # annotations only: the rules (and libcst) are not loaded to write a report
    from ..rule import Rule


def escape_data(text: str) -> str:
    """A workflow command's message: ``%`` -> ``%25``, CR -> ``%0D``, LF -> ``%0A``."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as :func:`escape_data`, plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding, root: Path) -> str:
    """One finding as a workflow command line (no newline)."""
    end_line, end_column = end_of(finding)
    level = "error" if finding.code == PARSE_ERROR else "warning"
    properties = {
        "file": relative_path(finding.path, root),
        "line": finding.line,
        "col": finding.column + 1,
        "endLine": end_line,
        "endColumn": end_column + 1,
        "title": finding.code,
    }
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{level} {props}::{escape_data(described(finding))}"


def render(findings: Sequence[Finding], rules: Sequence[type[Rule]], root: Path) -> str:
    """Every finding as a workflow command line."""
    return "".join(annotation(f, root) + "\n" for f in findings)
