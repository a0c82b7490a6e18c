"""The human formats: ``concise`` (one line a finding, as flake8 prints) and ``full`` (ruff's
default: the line with a caret under the finding, and the fix on offer).

``path:line:col: CODE [*] message`` with a 1-based column; a notebook's findings read
``path:cell N:line:col: ...``. ``[*]`` marks a finding ``--fix`` can fix (with
``unsafe=True``, also those only ``--unsafe-fixes`` fixes). Colour is ANSI, on when asked
(the CLI turns it on for a terminal, honouring ``NO_COLOR`` and ``FORCE_COLOR``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ..finding import Finding
from .sources import source_lines

if TYPE_CHECKING:  # annotations only: the rules (and libcst) are not loaded to write a report
    from ..rule import Rule

BOLD, RED, CYAN, BLUE, RESET = "\x1b[1m", "\x1b[31m", "\x1b[36m", "\x1b[34m", "\x1b[0m"


def applicable(finding: Finding, unsafe: bool = False) -> bool:
    """Would ``--fix`` (with ``--unsafe-fixes`` when ``unsafe``) fix this finding?"""
    fix = finding.fix
    return fix is not None and bool(fix.edits) and (fix.safe or unsafe)


def line(finding: Finding, unsafe: bool = False, color: bool = False) -> str:
    """One finding as a line of text (no newline)."""
    def paint(text: str, *styles: str) -> str:
        return "".join(styles) + text + RESET if color else text

    where = f"{finding.path}:cell {finding.cell}" if finding.cell else finding.path
    marker = " " + paint("[*]", CYAN) if applicable(finding, unsafe) else ""
    return (f"{paint(where, BOLD)}:{finding.line}:{finding.column + 1}: "
            f"{paint(finding.code, BOLD, RED)}{marker} {finding.message}")


def _snippet(finding: Finding, lines: Sequence[str] | None, color: bool) -> list[str]:
    """ruff's snippet: the line before, the flagged line with carets under the finding, the
    line after, each numbered; nothing when the source cannot be read."""
    if not lines or not 0 < finding.line <= len(lines):
        return []

    def paint(text: str, *styles: str) -> str:
        return "".join(styles) + text + RESET if color else text

    first, last = max(1, finding.line - 1), min(len(lines), finding.line + 1)
    width = len(str(last))
    gutter = paint(" " * width + " |", BLUE)
    out = [gutter]
    for number in range(first, last + 1):
        text = lines[number - 1].rstrip("\r\n")
        shown = text.expandtabs(4)
        out.append(f"{paint(str(number).rjust(width) + ' |', BLUE)} {shown}".rstrip())
        if number == finding.line:
            start = len(text[: finding.column].expandtabs(4))
            if finding.end_line == finding.line and finding.end_column > finding.column:
                end = len(text[: finding.end_column].expandtabs(4))
            else:
                end = len(shown)
            carets = "^" * max(1, end - start)
            out.append(f"{gutter} {' ' * start}{paint(carets + ' ' + finding.code, BOLD, RED)}")
    out.append(gutter)
    if finding.fix is not None:
        out.append(f"{' ' * width} {paint('=', BLUE)} help: {finding.fix.description}"
                   + ("" if finding.fix.safe else " (unsafe)"))
    return out


def render(findings: Sequence[Finding], rules: Sequence[type[Rule]], root: Path, *,
           full: bool = False, unsafe: bool = False, color: bool = False) -> str:
    """Every finding on its own line (``full``: each followed by its snippet and a blank
    line). The CLI adds the summary line."""
    if not full:
        return "".join(line(f, unsafe, color) + "\n" for f in findings)
    parts = []
    for finding in findings:
        parts.append(line(finding, unsafe, color))
        parts.extend(_snippet(finding, source_lines(finding), color))
        parts.append("")
    return "".join(p + "\n" for p in parts)
