"""Findings as the protocol carries them: a ``Diagnostic`` (range in the client's units, a link
to the rule's docs) and a ``TextEdit`` between two code-point positions. Imports lsprotocol
(installed with pygls)."""

from __future__ import annotations

from lsprotocol import types

from ..finding import PARSE_ERROR, Finding
from ..links import rule_docs_url
from .encoding import to_units


def rule_url(code: str) -> str | None:
    """The URL of the docs of rule ``code`` (see :func:`devlint.links.rule_docs_url`: the
    package's ``Documentation`` URL, else the source tree's ``docs/rules.md``), or ``None``
    (for ``DEV000`` too): a diagnostic links only to a page that exists."""
    return None if code == PARSE_ERROR else rule_docs_url(code, local=True)


def diagnostic(finding: Finding, lines: list[str], units: str) -> types.Diagnostic:
    """``finding`` of the text split into ``lines`` (:func:`~devlint.lsp.encoding.split_lines`)
    as a diagnostic, columns in ``units`` (the negotiated position encoding)."""
    start_line = lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""
    end_row = finding.end_line or finding.line
    end_text = lines[end_row - 1] if 0 < end_row <= len(lines) else start_line
    end_column = finding.end_column if finding.end_line else finding.column + 1
    if (end_row, end_column) <= (finding.line, finding.column):  # DEV000: the whole rest of the line
        end_row, end_text, end_column = finding.line, start_line, max(len(start_line), finding.column + 1)
    return types.Diagnostic(
        range=types.Range(
            start=types.Position(line=max(finding.line - 1, 0), character=to_units(start_line, finding.column, units)),
            end=types.Position(line=max(end_row - 1, 0), character=to_units(end_text, end_column, units)),
        ),
        message=finding.message,
        severity=types.DiagnosticSeverity.Error if finding.code == PARSE_ERROR else types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=(types.CodeDescription(href=url) if (url := rule_url(finding.code)) else None),
        source="devlint",
    )


def text_edit(lines: list[str], line: int, column: int, end_line: int, end_column: int, text: str,
              units: str) -> types.TextEdit:
    """Replace the text between two (1-based line, code-point column) positions of ``lines``
    by ``text``; a line past the end stands for the end of the text."""

    def position(row: int, col: int) -> types.Position:
        if row > len(lines):
            return types.Position(line=len(lines), character=0)
        return types.Position(line=row - 1, character=to_units(lines[row - 1], col, units))

    return types.TextEdit(range=types.Range(start=position(line, column), end=position(end_line, end_column)), new_text=text)
