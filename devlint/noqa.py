"""``# noqa`` exactly as flake8 applies it, for the CLI (flake8 applies its own).

flake8 matches ``# noqa`` / ``# noqa: CODE[,CODE]`` (any case) with its own regular
expression, lets a listed code also act as a prefix (``# noqa: DEV1`` silences DEV101), and
searches the *whole logical line* a finding is on, so a comment on any line of a multi-line
statement counts. ``# flake8: noqa`` on a line of its own skips the file.
"""

from __future__ import annotations

import tokenize
from typing import Iterable

from flake8.defaults import NOQA_FILE, NOQA_INLINE_REGEXP
from flake8.utils import parse_comma_separated_list

from .finding import Finding
from .source import generate_tokens, split_lines


def _line_map(text: str) -> dict[int, str]:
    lines = split_lines(text, keepends=True)
    mapping: dict[int, str] = {}
    first, last = len(lines) + 2, -1
    try:
        for tok in generate_tokens(text):
            if tok.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                continue
            first, last = min(first, tok.start[0]), max(last, tok.end[0])
            if tok.type in (tokenize.NL, tokenize.NEWLINE):
                joined = "".join(lines[first - 1:last])
                mapping.update(dict.fromkeys(range(first, last + 1), joined))
                first, last = len(lines) + 2, -1
    except (tokenize.TokenError, SyntaxError, ValueError):
        return {}
    return mapping


def is_suppressed(code: str, line: str | None) -> bool:
    """Does the ``# noqa`` on ``line`` (a physical or joined logical line) silence ``code``?"""
    if not line:
        return False
    match = NOQA_INLINE_REGEXP.search(line)
    if match is None:
        return False
    codes = match.groupdict()["codes"]
    if codes is None:
        return True
    listed = set(parse_comma_separated_list(codes))
    return code in listed or code.startswith(tuple(listed))


def file_skipped(text: str) -> bool:
    """``# flake8: noqa`` on a line of its own."""
    return "flake8" in text.lower() and any(NOQA_FILE.match(line) for line in split_lines(text))


def apply(findings: Iterable[Finding], text: str, line_map=None) -> list[Finding]:
    """The findings that no ``# noqa`` comment silences (flake8 semantics). ``line_map``, a
    function of the text giving what ``_line_map`` gives (a ``.get(line)``), stands in for it
    (the language server's incremental one, :class:`devlint.lsp.noqa_lines.LineGroups`)."""
    findings = list(findings)
    if not findings or "noqa" not in text.lower():
        return findings
    if file_skipped(text):
        return []
    mapping = (line_map or _line_map)(text)
    physical = None
    kept = []
    for finding in findings:
        line = mapping.get(finding.line)
        if line is None:
            physical = split_lines(text) if physical is None else physical
            line = physical[finding.line - 1] if 0 < finding.line <= len(physical) else None
        if not is_suppressed(finding.code, line):
            kept.append(finding)
    return kept


# ---- adding ``# noqa: CODE`` (the server's quick fix and ``check --add-noqa``) ------------------

def merge(line: str, codes: Iterable[str]) -> str:
    """``line`` (one physical line, line ending kept) with ``codes`` added to its ``# noqa``.

    The result suppresses, under flake8's own regular expression, every code the line
    suppressed before plus each of ``codes``: ``x  # noqa: E501 reason`` + DEV102 gives
    ``x  # noqa: E501,DEV102 reason`` (appending after ``reason`` would not suppress: flake8's
    code list stops at the first word that is not a code). A bare ``# noqa`` already silences
    everything and is left alone; a code already covered (also by a prefix) is not repeated.
    Without a ``# noqa`` a new ``  # noqa: CODE`` comment is appended. The caller makes sure
    the end of ``line`` is not inside a string (see :func:`add`)."""
    body = line.rstrip("\r\n")
    ending = line[len(body):]
    new = list(dict.fromkeys(c for c in codes if not is_suppressed(c, body)))
    if not new:
        return line
    match = NOQA_INLINE_REGEXP.search(body)
    if match is None:
        return body.rstrip(" \t") + "  # noqa: " + ", ".join(new) + ending
    listed = match.group("codes")  # not None: a bare noqa suppresses everything
    at = match.start("codes") + len(listed.rstrip(", \t"))
    sep = ", " if ", " in listed else ","
    return body[:at] + sep + sep.join(new) + body[at:] + ending


def _layout(text: str) -> tuple[dict[int, tuple[int, int]], dict[int, int], set[int]] | None:
    """(line -> (first, last) line of its logical line, line -> column of its comment, lines
    whose end lies inside a string), or ``None`` when the text does not tokenize."""
    logical: dict[int, tuple[int, int]] = {}
    comments: dict[int, int] = {}
    in_string: set[int] = set()
    first, last = 0, -1
    try:
        for tok in generate_tokens(text):
            kind, (start, column), (end, _) = tok.type, tok.start, tok.end
            if kind in (tokenize.ENDMARKER, tokenize.DEDENT, tokenize.INDENT):
                continue
            if kind == tokenize.COMMENT:
                comments[start] = column
            elif end > start:  # a string over several lines
                in_string.update(range(start, end))
            first, last = (start if last < 0 else first), max(last, end)
            if kind in (tokenize.NL, tokenize.NEWLINE):
                logical.update(dict.fromkeys(range(first, last + 1), (first, last)))
                last = -1
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return logical, comments, in_string


def _target(lines: list[str], layout, line: int, codes: list[str]) -> tuple[int, list[str]] | None:
    """(1-based physical line to edit, codes it must gain) for findings of ``codes`` on ``line``."""
    if not 0 < line <= len(lines):
        return None
    if layout is None or line not in layout[0]:
        return line, codes
    logical, comments, in_string = layout
    first, last = logical[line]
    joined = "".join(lines[first - 1:last])
    codes = [c for c in codes if not is_suppressed(c, joined)]
    if not codes:
        return None
    for number in range(first, last + 1):
        match = NOQA_INLINE_REGEXP.search(lines[number - 1])
        if match is not None:  # flake8 reads the first # noqa of the logical line only
            column = comments.get(number)
            return (number, codes) if column is not None and column <= match.start() else None
    def open_end(n: int) -> bool:
        return n in in_string or (n not in comments and lines[n - 1].rstrip("\r\n").endswith("\\"))
    return (line if not open_end(line) else last), codes


def edit(text: str, line: int, codes: Iterable[str]) -> tuple[int, str] | None:
    """(1-based line number, its new text with line ending) that makes ``# noqa`` silence
    ``codes`` for a finding on ``line``, or ``None`` when nothing needs to (or can) change.

    flake8 searches the whole logical line, so an existing ``# noqa`` anywhere in a
    multi-line statement is merged into (:func:`merge`); otherwise the comment goes on
    ``line`` itself, or on the statement's last line when ``line`` ends inside a string or
    with a backslash. A ``# noqa`` that sits inside a string literal cannot be extended
    without changing the string: ``None``."""
    lines = split_lines(text, keepends=True)
    target = _target(lines, _layout(text), line, list(codes))
    if target is None:
        return None
    number, new = target
    merged = merge(lines[number - 1], new)
    return None if merged == lines[number - 1] else (number, merged)


def add(text: str, findings: Iterable[Finding]) -> tuple[str, int]:
    """(``text`` with a ``# noqa`` for every finding, number of lines changed): what
    ``devlint check --add-noqa`` writes. Every other byte is kept; findings already
    suppressed are skipped, so a second run changes nothing."""
    lines = split_lines(text, keepends=True)
    layout = _layout(text)
    wanted: dict[int, list[str]] = {}
    for finding in findings:
        target = _target(lines, layout, finding.line, [finding.code])
        if target is not None:
            wanted.setdefault(target[0], []).extend(target[1])
    changed = 0
    for number, codes in wanted.items():
        merged = merge(lines[number - 1], codes)
        if merged != lines[number - 1]:
            lines[number - 1], changed = merged, changed + 1
    return "".join(lines), changed
