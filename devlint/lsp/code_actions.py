"""Code actions on a document's findings: apply one finding's fix (an unsafe one labelled so),
add ``# noqa: CODE`` to its line (merged into an existing ``# noqa``, see
:func:`devlint.noqa.edit`), and ``source.fixAll.devlint`` (every safe fix, as one edit).
Imports lsprotocol (installed with pygls)."""

from __future__ import annotations

from lsprotocol import types

from .. import noqa
from ..finding import PARSE_ERROR, Finding
from ..incremental import common_prefix, common_suffix
from .diagnostics import diagnostic, text_edit
from .encoding import line_column, split_lines
from .session import Published, Session

#: The code action kinds offered (the server's ``codeActionProvider`` options).
KINDS = [types.CodeActionKind.QuickFix, "source.fixAll.devlint"]


def overlaps(finding: Finding, range_: types.Range) -> bool:
    """Do the lines of ``finding`` meet those of ``range_``?"""
    start = finding.line - 1
    end = (finding.end_line or finding.line) - 1
    return start <= range_.end.line and range_.start.line <= end


async def code_actions(session: Session, params: types.CodeActionParams) -> list[types.CodeAction]:
    """The actions for the findings of the requested document that meet the requested range,
    of the kinds the client asked for (``context.only``), after the lint of its current text."""
    uri = params.text_document.uri
    entry = await session.current(uri)
    if entry is None:
        return []
    only = params.context.only

    def allowed(kind: str) -> bool:
        return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)

    units = session.encoding()
    lines = split_lines(entry.text)
    sent = {(d.code, d.range.start.line, d.range.start.character): d for d in params.context.diagnostics
            if d.source == "devlint"}
    actions = []
    noqa_actions: dict[tuple[str, int], types.CodeAction] = {}  # one per code and line
    for finding in entry.findings:
        if finding.code == PARSE_ERROR or not overlaps(finding, params.range):
            continue
        made = diagnostic(finding, lines, units)
        made = sent.get((made.code, made.range.start.line, made.range.start.character), made)
        if finding.fix is not None and finding.fix.edits and allowed(types.CodeActionKind.QuickFix):
            fix = finding.fix
            title = f"{finding.code}: {fix.description}" + ("" if fix.safe else " (unsafe fix)")
            actions.append(types.CodeAction(
                title=title, kind=types.CodeActionKind.QuickFix, diagnostics=[made], is_preferred=fix.safe,
                edit=types.WorkspaceEdit(changes={uri: [text_edit(lines, e.line, e.column, e.end_line, e.end_column, e.text, units)
                                                        for e in fix.edits]}),
            ))
        if allowed(types.CodeActionKind.QuickFix):
            same = noqa_actions.get((finding.code, finding.line))
            if same is not None:  # two findings of one code on a line: one action for both
                same.diagnostics.append(made)
                continue
            change = noqa.edit(entry.text, finding.line, [finding.code])
            if change is not None:
                row, new_line = change
                body = new_line.rstrip("\r\n")
                action = types.CodeAction(
                    title=f"Disable {finding.code} for this line", kind=types.CodeActionKind.QuickFix,
                    diagnostics=[made],
                    edit=types.WorkspaceEdit(changes={uri: [text_edit(lines, row, 0, row, len(lines[row - 1]), body, units)]}),
                )
                noqa_actions[(finding.code, finding.line)] = action
                actions.append(action)
    if allowed("source.fixAll.devlint"):
        edit = fix_all_edit(entry, lines, units)
        if edit is not None:
            actions.append(types.CodeAction(title="Fix all devlint findings (safe fixes)", kind="source.fixAll.devlint",
                                            edit=types.WorkspaceEdit(changes={uri: [edit]})))
    return actions


def fix_all_edit(entry: Published, lines: list[str], units: str) -> types.TextEdit | None:
    """One edit that applies every safe fix of ``entry`` (the changed span only, never
    splitting a ``\\r\\n``), or ``None`` when nothing changes."""
    from ..fix import apply

    fixed, count = apply(entry.text, entry.findings)
    if not count or fixed == entry.text:
        return None
    start = common_prefix(entry.text, fixed)
    if 0 < start < len(entry.text) and entry.text[start - 1] == "\r" and entry.text[start] == "\n":
        start -= 1  # never split a \r\n
    tail = common_suffix(entry.text, fixed, min(len(entry.text), len(fixed)) - start)
    end = len(entry.text) - tail
    if 0 < end < len(entry.text) and entry.text[end - 1] == "\r" and entry.text[end] == "\n":
        end += 1
        tail -= 1
    (row, column), (end_row, end_column) = line_column(entry.text, start), line_column(entry.text, end)
    return text_edit(lines, row, column, end_row, end_column, fixed[start:len(fixed) - tail], units)
