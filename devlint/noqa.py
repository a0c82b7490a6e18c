"""``# noqa`` exactly as flake8 applies it, for the CLI (flake8 applies its own).

flake8 matches ``# noqa`` / ``# noqa: CODE[,CODE]`` (any case) with its own regular
expression, lets a listed code also act as a prefix (``# noqa: DEV1`` silences DEV101), and
searches the *whole logical line* a finding is on, so a comment on any line of a multi-line
statement counts. ``# flake8: noqa`` on a line of its own skips the file.
"""

from __future__ import annotations

import io
import tokenize
from typing import Iterable

from flake8.defaults import NOQA_FILE, NOQA_INLINE_REGEXP
from flake8.utils import parse_comma_separated_list

from .finding import Finding


def _line_map(text: str) -> dict[int, str]:
    lines = text.splitlines(keepends=True)
    mapping: dict[int, str] = {}
    first, last = len(lines) + 2, -1
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
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
    return any(NOQA_FILE.match(line) for line in text.splitlines())


def apply(findings: Iterable[Finding], text: str) -> list[Finding]:
    """The findings that no ``# noqa`` comment silences (flake8 semantics)."""
    findings = list(findings)
    if not findings or "noqa" not in text.lower():
        return findings
    if file_skipped(text):
        return []
    mapping = _line_map(text)
    physical = text.splitlines()
    kept = []
    for finding in findings:
        line = mapping.get(finding.line)
        if line is None and 0 < finding.line <= len(physical):
            line = physical[finding.line - 1]
        if not is_suppressed(finding.code, line):
            kept.append(finding)
    return kept
