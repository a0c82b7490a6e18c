"""What the target Python refuses, and the text libcst is given.

libcst parses a superset of any one Python's grammar (it takes 3.12 f-strings on 3.11, a NUL
byte in a string) and mis-reads some text every Python accepts (a form feed in a statement's
indentation: it fails, or drops the form feed and shifts every column after it). So before
libcst sees a file:

- :func:`refusal` parses it with the stdlib ``ast`` as the target Python would (the parse the
  pre-check needs anyway, so no second one): what that Python refuses is one ``DEV000``.
- :func:`for_libcst` removes what Python's tokenizer ignores in front of a form feed in a
  statement's indentation (a form feed resets the indentation count, CPython's tokenizer.c);
  :func:`restore` moves the findings' columns back and drops the fixes that would cross it.

The target is ``target-version`` in ``[tool.devlint]`` or ``--target-version`` (carried to
worker processes in ``DEVLINT_TARGET_VERSION``), the running Python by default. A target newer
than the running Python cannot be judged here: libcst's verdict stands.
"""

from __future__ import annotations

import ast
import bisect
import os
import re
import sys
from dataclasses import replace
from typing import Iterable

from . import memory_budget, source

ENV = "DEVLINT_TARGET_VERSION"
_RUNNING = sys.version_info[:2]


def parse_target(value: object) -> tuple[int, int]:
    """``"py311"`` or ``"3.11"`` -> ``(3, 11)``; raises ``ValueError`` for anything else."""
    text = str(value).strip().lower()
    match = re.fullmatch(r"py3(\d+)|3\.(\d+)", text)
    if not isinstance(value, str) or match is None:
        raise ValueError(f'target-version must look like "py311" or "3.11", got {value!r}')
    return 3, int(match.group(1) or match.group(2))


def target_version() -> tuple[int, int]:
    """(3, minor) of the Python the code must run on: the setting, else the running one."""
    try:
        return parse_target(os.environ.get(ENV, ""))
    except ValueError:
        return _RUNNING


def set_target_version(version: tuple[int, int] | None) -> None:
    """Set (``None``: clear) the target Python for this process and those it starts."""
    if version is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = f"{version[0]}.{version[1]}"


def refusal(text: str, tree: ast.Module | None = None) -> tuple[ast.Module | None, tuple[int, int, str] | None, int | None]:
    """``(stdlib ast or None, (line, 0-based column, reason) the target refuses or None,
    lines kept or None)``.

    ``tree``, an ``ast`` the caller parsed with the running Python (flake8's), is kept when the
    target is the running Python. The ``ast`` is ``None`` when it cannot be had (a newer
    target, a recursion limit), with no refusal: libcst then decides. A text over
    :data:`~devlint.memory_budget.MEMORY_BUDGET_MB` is parsed up to a cut before a statement within
    it (:func:`devlint.memory_budget.plan`; the lines kept, the ``ast`` is theirs), or refused
    whole when no such cut fits or parses."""
    nul = text.find("\0")
    if nul >= 0:
        line = len(source.NEWLINE.findall(text, 0, nul)) + 1
        begin = max(text.rfind("\n", 0, nul), text.rfind("\r", 0, nul)) + 1
        return None, (line, nul - begin, "source code cannot contain null bytes"), None
    target = target_version()
    if tree is not None and target >= _RUNNING:
        return tree, None, None
    kept = None
    try:
        tree, kept = _parse(text, feature_version=target if target < _RUNNING else None)
    except _NoCut as over:
        return None, (1, 0, f"{over.lines:,} lines, over {budget_words()}, with no cut that parses"), None
    except SyntaxError as err:
        if target > _RUNNING:
            return None, None, None
        return None, (err.lineno or 1, max((err.offset or 1) - 1, 0), err.msg), None
    except (ValueError, RecursionError, MemoryError, OverflowError):
        return None, None, None
    if target < (3, 12) <= _RUNNING:
        found = _new_fstring(tree, text)
        if found is not None:
            return None, found, None
    return tree, None, kept


def accepts(text: str) -> bool:
    """Does the target Python accept ``text`` (no NUL byte, which the caller checks)? The
    verdict of :func:`refusal` without positions, for a piece of a file (the language server
    judges the statements an edit touched); a target newer than the running Python, or an
    ``ast`` that cannot be had, accepts (libcst's verdict stands, as there)."""
    target = target_version()
    try:
        tree = ast.parse(text, feature_version=target if target < _RUNNING else None)
    except SyntaxError:
        return target > _RUNNING
    except (ValueError, RecursionError, MemoryError, OverflowError):
        return True
    return not (target < (3, 12) <= _RUNNING and _new_fstring(tree, text) is not None)


def budget_words() -> str:
    """How a DEV000 names the budget: ``"the 600 MB memory budget"``."""
    return memory_budget.budget_words()


def _line_count(text: str) -> int:
    """Lines of ``text`` as Python counts them (``\\r\\n``, ``\\r`` or ``\\n`` each end one)."""
    return len(source.NEWLINE.findall(text)) + (not text.endswith(("\n", "\r")))


class _NoCut(Exception):
    """A text over the budget whose pieces do not parse: ``lines`` it has."""

    def __init__(self, lines: int) -> None:
        super().__init__(lines)
        self.lines = lines


def _parse(text: str, feature_version) -> tuple[ast.Module, int | None]:
    """``(ast.parse(text), None)``, in pieces where the text is long (:func:`devlint.memory_budget.piece_bounds`);
    over :data:`~devlint.memory_budget.MEMORY_BUDGET_MB` (:func:`devlint.memory_budget.plan`),
    ``(ast of the first lines, how many)``. Each piece is parsed after as many blank lines as
    precede it, so line numbers are the file's. A cut can only misjudge a line inside a
    string, a bracket, a continued line or before a clause (``else:``): a piece then fails,
    and the text is parsed whole, which also reports a syntax error as before. A text over
    the budget raises :class:`_NoCut` instead, as does one whose first piece is over it."""
    lines = text.split("\n")
    bounds = memory_budget.piece_bounds(text, lines)
    kept = memory_budget.plan(lines, bounds).kept
    if kept == 0:
        raise _NoCut(_line_count(text))
    if len(bounds) == 2:
        del lines
        return ast.parse(text, feature_version=feature_version), None
    if kept is not None:
        bounds = [b for b in bounds if b <= kept]
    body: list = []
    try:
        for a, b in zip(bounds, bounds[1:]):
            body += ast.parse("\n" * a + "\n".join(lines[a:b]), feature_version=feature_version).body
    except SyntaxError:
        del body
        if kept is not None:
            raise _NoCut(_line_count(text)) from None
        return ast.parse(text, feature_version=feature_version), None
    return ast.Module(body=body, type_ignores=[]), kept


def _new_fstring(tree: ast.Module, text: str) -> tuple[int, int, str] | None:
    """The first f-string that needs Python 3.12 (PEP 701: its own quote, a backslash or a
    comment inside a replacement field), for a target before 3.12 on a newer interpreter,
    whose ``feature_version`` does not check them."""
    if not re.search(r"""[fF][rR]?['"]|[rR][fF]['"]""", text):
        return None
    lines = source.split_lines(text)
    for node in ast.walk(tree):
        if node.__class__ is not ast.JoinedStr or node.lineno != node.end_lineno:
            continue
        literal = lines[node.lineno - 1].encode()[node.col_offset:node.end_col_offset].decode(errors="replace")
        quote = literal.lstrip("rRfFbBuU")[:1]
        for part in node.values:
            if part.__class__ is ast.FormattedValue:
                field = ast.get_source_segment(text, part.value) or ""
                if quote in field or "\\" in field or "#" in field:
                    return node.lineno, node.col_offset, "f-string: this nesting needs Python 3.12"
    return None


def tokenizer_failure(text: str, parse, most_lines: int = 20_000) -> int | None:
    """The first line of the statement in which libcst's tokenizer fails on ``text`` (which
    CPython parses): a bisection over prefixes cut before statements (no such cut lies in a
    string or a bracket), each parsed by ``parse`` (libcst's ``parse_module``). ``None`` for
    texts over ``most_lines``."""
    lines = source.split_lines(text, keepends=True)
    if len(lines) > most_lines:
        return None
    try:
        firsts = sorted({n.lineno for n in ast.walk(ast.parse(text)) if isinstance(n, ast.stmt)})
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    cuts = [first - 1 for first in firsts[1:]] + [len(lines)]

    def fails(k: int) -> bool:
        try:
            parse("".join(lines[:cuts[k]]))
        except Exception as exc:  # noqa: BLE001 - libcst.ParserSyntaxError, not imported here
            return str(getattr(exc, "message", "")).startswith("tokenizer error")
        return False

    low, high = 0, len(cuts) - 1
    if not fails(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if fails(middle):
            high = middle
        else:
            low = middle + 1
    return firsts[low]


#: The leading whitespace of a line, up to and including its last form feed.
_FORM_FEED_INDENT = re.compile(r"(?:(?<=[\r\n])|\A)[ \t\f]*\f")


def for_libcst(text: str, tree: ast.Module | None) -> tuple[str, dict[int, int]]:
    """``(text for libcst, {1-based line: characters removed at its start})``.

    On each line that starts a statement with a form feed in its indentation, what stands
    before the last form feed is removed: Python counts the indentation from there, libcst
    would not. Lines inside a multi-line string (found in ``tree``, the stdlib ``ast`` of
    ``text``), blank lines and comment lines are left as they are."""
    if "\f" not in text:
        return text, {}
    spans = []
    for match in _FORM_FEED_INDENT.finditer(text):
        after = text[match.end():match.end() + 1]
        if after and after not in "\r\n#":
            spans.append(match.span())
    if not spans:
        return text, {}
    starts = source.line_starts(text)
    inside = _string_lines(tree) if tree is not None else set()
    removed: dict[int, int] = {}
    out, last = [], 0
    for begin, end in spans:
        line = bisect.bisect_right(starts, begin)
        if line in inside:
            continue
        out.append(text[last:begin])
        last = end
        removed[line] = end - begin
    return "".join(out) + text[last:], removed


def _string_lines(tree: ast.Module) -> set[int]:
    """Lines that begin inside a string literal spanning several lines."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if node.__class__ in (ast.Constant, ast.JoinedStr) and node.end_lineno > node.lineno:
            if node.__class__ is ast.JoinedStr or isinstance(node.value, (str, bytes)):
                lines.update(range(node.lineno + 1, node.end_lineno + 1))
    return lines


def restore(findings: Iterable, removed: dict[int, int]) -> list:
    """Findings on :func:`for_libcst`'s text -> on the file's: columns moved right by what was
    removed at the start of their line; a fix with an edit that crosses such a line start
    (it would drop the removed characters) is dropped."""
    if not removed:
        return list(findings)
    out = []
    for finding in findings:
        fix = finding.fix
        if fix is not None:
            edits = []
            for edit in fix.edits:
                if any(line in removed for line in range(edit.line + 1, edit.end_line + 1)):
                    fix = None
                    break
                edits.append(replace(edit, column=edit.column + removed.get(edit.line, 0),
                                     end_column=edit.end_column + removed.get(edit.end_line, 0)))
            if fix is not None:
                fix = replace(fix, edits=tuple(edits))
        out.append(replace(finding, column=finding.column + removed.get(finding.line, 0),
                           end_column=finding.end_column + removed.get(finding.end_line, 0), fix=fix))
    return out
