"""The ``DEV000`` finding of a file that does not decode or does not parse, at the failing
line and in Python's words where they agree."""

from __future__ import annotations

import ast

import libcst as cst

from . import parsing
from . import syntax
from .finding import PARSE_ERROR, Finding


#: The DEV000 message of a file holding NUL bytes (an image, an archive renamed ``.py``).
BINARY = "binary file (it holds NUL bytes), not Python source: exclude it"


def undecodable(data: bytes, path: str, exc: Exception) -> Finding:
    """The ``DEV000`` finding of bytes that do not decode: a binary file says so; bytes that
    are not UTF-8 (a Latin-1 file without a coding cookie) name the first bad byte, where it
    is; anything else (an unknown codec in the cookie) in Python's words."""
    if b"\x00" in data:
        return Finding(path, 1, 0, PARSE_ERROR, BINARY, 1, 0)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as bad:
        start = data.rfind(b"\n", 0, bad.start) + 1
        line, col = data.count(b"\n", 0, bad.start) + 1, len(data[start:bad.start].decode("utf-8", "replace"))
        return Finding(path, line, col, PARSE_ERROR, f"not UTF-8 (byte 0x{data[bad.start]:02x}): save it as UTF-8 "
                       "or declare its coding", line, col + 1)
    return Finding(path, 1, 0, PARSE_ERROR, f"could not parse: {exc}", 1, 0)


def parse_failure(text: str, path: str, exc: Exception) -> Finding:
    """The ``DEV000`` finding of a parse of ``text`` that raised ``exc``: at the syntax error
    (in CPython's words where it agrees) for a ``ParserSyntaxError``, else at line 1 naming it;
    a text holding NUL characters is a binary file."""
    if "\x00" in text:
        return Finding(path, 1, 0, PARSE_ERROR, BINARY, 1, 0)
    if isinstance(exc, cst.ParserSyntaxError):
        line, col, reason = _syntax_error(text, exc)
        return Finding(path, line, col, PARSE_ERROR, f"could not parse: {reason}, line {line}", line, col)
    return Finding(path, 1, 0, PARSE_ERROR, f"could not parse: {type(exc).__name__}: {exc}", 1, 0)


def _syntax_error(text: str, exc: cst.ParserSyntaxError) -> tuple[int, int, str]:
    """(line, 0-based column, reason) of a syntax error, in CPython's words where it agrees.
    Where CPython accepts the text, libcst's own limit is named, at the line where its
    tokenizer first fails (it reports line 1 for any tokenizer error)."""
    try:
        compile(text, "<devlint>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        if err.lineno:
            return err.lineno, max((err.offset or 1) - 1, 0), err.msg
    except (RecursionError, MemoryError, ValueError):
        pass
    else:
        reason = str(exc.message).splitlines()[0] if exc.message else "syntax error"
        line = syntax.tokenizer_failure(text, parsing.parse_module) if reason.startswith("tokenizer error") else None
        detail = reason.split(": ", 1)[-1]  # "tokenizer error: ..." / "parser error: ..."
        return line or max(exc.raw_line, 1), 0 if line else max(exc.raw_column, 0), f"libcst cannot read this valid Python ({detail})"
    reason = str(exc.message).splitlines()[0] if exc.message else "syntax error"
    return max(exc.raw_line, 1), max(exc.raw_column, 0), reason
