"""How much memory a text's analysis will take, predicted before it is parsed (issue 24).

One decision for every front end: :func:`estimate` (``devlint check`` through
:func:`devlint.syntax.refusal`, the language server through :func:`over_budget`). A text whose
prediction passes :data:`MEMORY_BUDGET_MB` is analysed up to the last piece boundary that fits
(the rest is one ``DEV000``), or refused whole when no piece does.

What the memory goes to, as measured on the peak RSS of ``devlint check`` (the table in
``benchmarks/bench_memory.py``, which checks the prediction over many shapes of text):

- the process (interpreter, libcst, the rules) and the text, held a few times over (as read,
  decoded, split into lines, as libcst's input);
- what stays for each analysed token: libcst's and the stdlib's trees, the findings (at most
  one a few tokens), positions: :data:`TOKEN_BYTES` a token, :data:`LINE_BYTES` a line;
- what libcst's parser holds *while* it parses one piece (the text is parsed in pieces of
  about 2,000 lines between top-level statements, :mod:`devlint.parsing`; a text with a
  ``\\r``, shorter than 3,000 lines or a single long statement is one piece): about
  :data:`PARSE_BYTES` a token, plus :data:`DEPTH_BYTES` a token for each bracket around it.
  That last part is why nesting costs so much: 100 lines of ``f(f(...(x)...))`` 80 deep hold
  1.5 GB (the parser's memory grows with the square of the depth), and the same tokens flat
  hold 10 MB. It is freed after each piece, so only the largest piece counts.

Tokens are counted from the text alone (UTF-8 bytes classified as word, space, bracket or
other; comments and string literals other than f-strings count as one token, their
characters as text): an upper bound of Python's tokens, since a bracket or word inside an
f-string or a docstring's quote counts too. No test calibrates this against a machine: the
benchmark does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import accumulate

#: The memory one file's analysis may take, in MB (issue 24): a file whose :func:`estimate`
#: passes it is analysed up to a cut before a statement within it, the rest is one DEV000.
MEMORY_BUDGET_MB = 600
#: Bytes: the process before any text (measured: 35 MB for ``devlint check`` of a tiny file).
PROCESS_BYTES = 64 << 20
#: Bytes a character of the whole text costs, times the bytes a character takes in Python's
#: ``str`` (1, 2 or 4): the text as read, decoded, split into lines and handed to libcst.
TEXT_COPIES = 5
#: Bytes a line of the whole text costs (a ``str`` object in the list of lines, its start).
TEXT_BYTES_PER_LINE = 100
#: Bytes each analysed token and line keep until the end (trees, findings, positions):
#: measured 380 B a token for lines that each hold a finding, 440 B on timm's code; and the
#: analysed text once more, times the bytes a character takes (string values in the trees).
TOKEN_BYTES, LINE_BYTES, CHAR_COPIES = 600, 200, 1
#: Bytes libcst's parser holds while it parses one piece, per token and per token and
#: bracket around it (measured: 1.7-2.8 KB a token for 20,000 flat lines parsed at once,
#: 1.6 KB a token and bracket for nested calls, 1.0 KB for nested lists).
PARSE_BYTES, DEPTH_BYTES = 3_000, 2_000

#: Texts longer than this many lines have their stdlib ``ast`` parsed in pieces of at least
#: this many lines, cut before a line at column 0 that opens a statement: the parse of one
#: long text holds its parser's arena and the whole tree at once (100k one-line statements:
#: 683 MB; in pieces 368 MB, and faster). The memory budget is charged by the same pieces.
PIECE_LINES = 2_000
_OPENS = re.compile(r"[A-Za-z_@]")
_CLAUSES = ("else", "elif", "except", "finally", "case")


def piece_bounds(text: str, lines: list[str]) -> list[int]:
    """First lines (0-based) of the pieces ``text`` (split at ``\\n`` into ``lines``) is
    parsed in, then ``len(lines)``: ``[0, len(lines)]`` for a text parsed whole (shorter than
    1.5 x :data:`PIECE_LINES`, or with a ``\\r``), else cuts at least :data:`PIECE_LINES`
    apart before a line at column 0 that opens a statement (not a clause, not after a
    backslash)."""
    if "\r" in text or len(lines) - 1 < PIECE_LINES * 3 // 2:
        return [0, len(lines)]
    bounds, i = [0], PIECE_LINES
    while i < len(lines) - PIECE_LINES // 2:
        line = lines[i]
        if _OPENS.match(line) and not line.startswith(_CLAUSES) and not lines[i - 1].endswith("\\"):
            bounds.append(i)
            i += PIECE_LINES
        else:
            i += 1
    bounds.append(len(lines))
    return bounds


def _class(byte: int) -> int:
    char = chr(byte)
    if byte >= 0x80 or char.isalnum() or char == "_":
        return ord("a")
    if char in " \t\f\v\r\n":
        return ord(" ")
    if char in "([{":
        return ord("(")
    if char in ")]}":
        return ord(")")
    return ord(".")


#: UTF-8 byte -> ``a`` (a word: letters, digits, ``_``, any non-ASCII byte), `` `` (space),
#: ``(`` / ``)`` (brackets) or ``.`` (any other character, one token each).
_CLASSES = bytes(_class(b) for b in range(256))
_INNERMOST = re.compile(rb"\(([^()]*)\)")
_Q1, _Q3 = "'", '"'
#: A comment, or a string literal on one line or triple-quoted (its prefix is looked at by
#: :func:`_literal`), each quote's pattern unrolled (no backtracking per character).
_LITERAL = re.compile("|".join([
    r"#[^\r\n]*",
    *(q * 3 + rf"[^{q}\\]*(?:(?:\\.|{q}(?!{q}{q}))[^{q}\\]*)*" + q * 3 for q in (_Q1, _Q3)),
    *(q + rf"[^{q}\\\r\n]*(?:\\.[^{q}\\\r\n]*)*" + q for q in (_Q1, _Q3)),
]))


def _literal(match: re.Match) -> str:
    """A comment or string literal as the one token it is; an f-string (an ``f`` or ``F`` in
    the two characters before it) as it stands: its fields are code."""
    at = match.start()
    if "f" in match.string[max(at - 2, 0):at].lower():
        return match.group()
    return "0"


def counts(piece: str) -> tuple[int, int]:
    """``(tokens, sum over the tokens of the brackets around each)`` of ``piece``, from its
    text alone (see the module's docstring): at least what Python's tokenizer would find.
    The last few pieces' counts are kept: the language server estimates its buffer after every
    keystroke, and an edit changes one piece of a long text."""
    found = _COUNTED.get(piece)
    if found is None:
        if len(_COUNTED) >= 8:
            del _COUNTED[next(iter(_COUNTED))]
        found = _COUNTED[piece] = _counted(piece)
    return found


_COUNTED: dict[str, tuple[int, int]] = {}


def _counted(piece: str) -> tuple[int, int]:
    classes = _LITERAL.sub(_literal, piece).encode("utf-8", "surrogatepass").translate(_CLASSES)
    while b"aa" in classes:  # a word is one token
        classes = classes.replace(b"aa", b"a")
    data = classes.replace(b" ", b"")  # one byte a token
    opens = data.count(b"(")
    if not opens:
        return len(data), 0
    if opens != data.count(b")"):  # brackets in an f-string's text, or not Python
        return len(data), _depths(data)
    # Each token counts once for each pair of brackets around it: a pair holds the tokens
    # between its two (one byte each), so the sum is (sum of the closing brackets' places) -
    # (sum of the opening ones') - (pairs), whichever opens what.
    return len(data), max(0, _places(data, b")") - _places(data, b"(") - opens)


def _places(data: bytes, byte: bytes) -> int:
    """The sum of the indexes of ``byte`` in ``data`` (no Python loop over them)."""
    parts = data.split(byte)
    return sum(accumulate(map(len, parts[:-1]))) + (len(parts) - 1) * (len(parts) - 2) // 2


def _depths(data: bytes) -> int:
    """The sum over the tokens of ``data`` (one byte each) of the brackets around each, for
    brackets that do not all pair up: innermost pairs counted and made plain tokens."""
    data = data.replace(b"()", b"aa")
    total = 0
    while b"(" in data:
        found = _INNERMOST.findall(data)
        if not found:
            break
        total += sum(map(len, found))
        data = _INNERMOST.sub(rb"a\1a", data)
    return total


@dataclass(frozen=True)
class Estimate:
    """What :func:`estimate` predicts for a text: ``bytes``, the peak resident memory of its
    analysis (of the lines kept, within the budget when some are not); ``kept``, how many lines fit :data:`MEMORY_BUDGET_MB`
    (``None``: all; ``0``: not even the first piece, the text is refused whole); ``lines``,
    how many it has."""

    bytes: int
    kept: int | None
    lines: int


_BEYOND_LATIN1 = re.compile("[^\x00-\xff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _widest(lines: list[str]) -> int:
    """Bytes a character of ``lines`` takes in a ``str`` (1, 2 or 4: the widest decides, as
    CPython's compact strings store it): two searches in C (one Python
    call a line took 9 ms for a 5,000-line text with one emoji)."""
    text = "\n".join(lines)
    return 4 if _ASTRAL.search(text) else 2 if _BEYOND_LATIN1.search(text) else 1


def budget_bytes() -> int:
    """:data:`MEMORY_BUDGET_MB` in bytes."""
    return MEMORY_BUDGET_MB << 20


def plan(lines: list[str], bounds: list[int], count=None) -> Estimate:
    """The estimate of the text ``"\\n".join(lines)`` analysed in pieces ``lines[a:b]`` for
    consecutive ``a, b`` in ``bounds`` (``[0, len(lines)]``: one piece), cut at the last bound
    whose pieces fit the budget. ``count``: what gives the piece's :func:`counts` of a text
    parsed whole (``None``: that function; the language server's counts again only around an
    edit); a text in several pieces uses :func:`counts`, whose cache keeps the pieces an edit
    did not change."""
    chars = sum(map(len, lines)) + len(lines)
    kind = 1 if all(map(str.isascii, lines)) else _widest(lines)
    used = PROCESS_BYTES + chars * TEXT_COPIES * kind + len(lines) * TEXT_BYTES_PER_LINE
    parsing, limit = 0, budget_bytes()
    for a, b in zip(bounds, bounds[1:]):
        piece = "\n".join(lines[a:b])
        tokens, depth = (count if count is not None and len(bounds) == 2 else counts)(piece)
        parse = tokens * PARSE_BYTES + depth * DEPTH_BYTES
        keep = tokens * TOKEN_BYTES + (b - a) * LINE_BYTES + len(piece) * kind * CHAR_COPIES
        if used + keep + max(parsing, parse) > limit:
            return Estimate(used + parsing, a, len(lines))
        used += keep
        parsing = max(parsing, parse)
    return Estimate(used + parsing, None, len(lines))


def estimate(text: str, bounds: list[int] | None = None, count=None) -> Estimate:
    """The predicted peak memory of analysing ``text`` (split at ``\\n``; ``bounds``, the first
    lines of the pieces it is parsed in, as :func:`piece_bounds` gives them;
    ``None``: those) and how many of its lines fit :data:`MEMORY_BUDGET_MB` (``count``: as
    for :func:`plan`)."""
    lines = text.split("\n")
    return plan(lines, piece_bounds(text, lines) if bounds is None else bounds, count)


def over_budget(text: str, count=None) -> bool:
    """Does ``text`` pass :data:`MEMORY_BUDGET_MB` (its analysis is cut or refused)? The
    decision ``devlint check`` takes (:func:`devlint.syntax.refusal`), for the language server
    (``count``: its :class:`devlint.lsp.budget_counts.PieceCounts`, see :func:`plan`)."""
    return estimate(text, count=count).kept is not None


def budget_words() -> str:
    """How a DEV000 names the budget: ``"the 600 MB memory budget"``."""
    return f"the {MEMORY_BUDGET_MB:,} MB memory budget"
