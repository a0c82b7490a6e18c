"""Hover: on a flagged range, the docs of the rules flagged there. Imports lsprotocol
(installed with pygls)."""

from __future__ import annotations

from lsprotocol import types

from ..rules import all_rules
from .encoding import from_units, split_lines
from .session import Session


def hover(session: Session, params: types.HoverParams) -> types.Hover | None:
    """The docs (Markdown) of each rule with a published finding at the hovered position of
    the requested document; ``None`` when there is none."""
    entry = session.published.get(params.text_document.uri)
    document = session.opened(params.text_document.uri)
    if entry is None or document is None:
        return None
    lines = split_lines(entry.text)
    row = params.position.line + 1
    if not 0 < row <= len(lines):
        return None
    column = from_units(lines[row - 1], params.position.character, session.encoding())
    docs = {r.code: r for r in all_rules()}
    parts = []
    for finding in entry.findings:
        end = (finding.end_line or finding.line, finding.end_column if finding.end_line else finding.column + 1)
        if (finding.line, finding.column) <= (row, column) <= end and finding.code in docs:
            text = docs[finding.code].docs()
            if text not in parts:
                parts.append(text)
    if not parts:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n---\n".join(parts)))
