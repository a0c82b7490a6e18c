"""Apply autofixes to source text and files (``devlint check --fix``/``--diff``).

Every fix goes through here, and nothing here may damage a file:

- Positions are the findings' (1-based lines, 0-based columns in code points of the decoded
  text) and lines are Python's (:mod:`devlint.source`: ``\\r\\n``, ``\\r``, ``\\n`` only).
  A position outside the text, or an edit whose ``original`` is not the text found there,
  drops its fix.
- The line endings a replacement adds take the file's line ending (those it keeps from the
  text it replaces stay as they were), and inside an f-string its string literals
  take a quote the f-string does not use (Python < 3.12 cannot nest the same quote).
- Overlapping fixes are left for a later pass, as ruff does; :func:`fix_source` lints again
  after each pass until nothing more applies.
- The result must compile (``compile()``, this interpreter's grammar); a fix that would
  break it is dropped, and a file that does not compile to begin with is not fixed.
- :func:`write_atomic` replaces a file through a temporary file in the same folder
  (fsync, rename, same mode bits), so a failed write leaves the old file whole; a read-only
  file (no write permission bit, even for root) is refused and left untouched.
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
import tempfile
import tokenize
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

from . import source
from .finding import Edit, Finding

_Span = tuple[int, int, str]  # (start offset, end offset, replacement)


def compiles(text: str | bytes, path: str = "<devlint>") -> bool:
    """Does ``text`` compile (bytes: honouring their coding cookie) under this Python?"""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning: invalid escape sequence...
            compile(text, path, "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError (NUL), RecursionError, MemoryError
        return False
    return True


def _quote_fitted(replacement: str, banned: set[str]) -> str | None:
    """``replacement`` with each string literal re-quoted to avoid the quote characters in
    ``banned`` (those of the f-strings around it); ``None`` if one cannot be, or if it holds
    a backslash or a comment, which an f-string expression cannot hold before Python 3.12."""
    if "\\" in replacement or "#" in replacement:
        return None
    try:
        tokens = list(source.generate_tokens(replacement))
    except (tokenize.TokenError, SyntaxError):
        return None
    if any(t.type == getattr(tokenize, "FSTRING_START", None) for t in tokens):
        return None  # an f-string in the replacement: too clever to re-quote
    out, last = [], 0
    starts = source.line_starts(replacement)
    for token in tokens:
        if token.type != tokenize.STRING:
            continue
        body = token.string.lstrip("rRbBuUfF")
        prefix, quote = token.string[: len(token.string) - len(body)], body[:1]
        if quote not in banned:
            continue
        other = ({"'", '"'} - banned - {quote})
        inner = body[1:-1]
        if body[:3] == quote * 3 or not other or (other := other.pop()) in inner:
            return None
        begin = starts[token.start[0] - 1] + token.start[1]
        end = starts[token.end[0] - 1] + token.end[1]
        out += [replacement[last:begin], prefix + other + inner + other]
        last = end
    return "".join(out) + replacement[last:]


def _fstring_quotes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, quote) of every single-line-quoted f-string in ``text`` (on Python 3.12+
    nested ones too); triple-quoted ones are left out, as a lone quote fits inside them."""
    if "f" not in text and "F" not in text:
        return []
    starts = source.line_starts(text)
    found: list[tuple[int, int, str]] = []
    open_: list[tuple[int, str]] = []
    fstart = getattr(tokenize, "FSTRING_START", None)
    fend = getattr(tokenize, "FSTRING_END", None)

    def at(row: int, column: int) -> int:  # the tokenizer ends a text without a final newline on a line more
        return starts[row - 1] + column if row <= len(starts) else len(text)

    try:
        for token in source.generate_tokens(text):
            if fstart is not None and token.type == fstart:
                open_.append((at(*token.start), token.string.lstrip("rRbBuUfF")[:3]))
            elif fend is not None and token.type == fend and open_:
                begin, quote = open_.pop()
                if len(set(quote)) != 1 or len(quote) < 3:
                    found.append((begin, at(*token.end), quote[:1]))
            elif token.type == tokenize.STRING:
                body = token.string.lstrip("rRbBuUfF")
                prefix = token.string[: len(token.string) - len(body)]
                if "f" in prefix.lower() and body[:3] not in ('"""', "'''"):
                    found.append((at(*token.start), at(*token.end), body[0]))
    except (tokenize.TokenError, SyntaxError):
        return found
    return found


def _spans(text: str, starts: list[int], edits: Sequence[Edit], newline: str, fstrings) -> list[_Span] | None:
    """The edits as offsets with their final replacement text, or ``None`` if one of them
    does not fit ``text``."""
    spans = []
    for edit in edits:
        try:
            begin = source.offset(starts, text, edit.line, edit.column)
            end = source.offset(starts, text, edit.end_line, edit.end_column)
        except ValueError:
            return None
        if end < begin or (edit.original is not None and text[begin:end] != edit.original):
            return None
        replacement = edit.text
        if newline != "\n" or "\r" in replacement:
            replacement = _new_line_ends(text[begin:end], replacement, newline)
        banned = {quote for low, high, quote in fstrings if low < begin and end < high}
        if banned:
            replacement = _quote_fitted(replacement, banned)
            if replacement is None:
                return None
        spans.append((begin, end, replacement))
    return spans


def _new_line_ends(old: str, new: str, newline: str) -> str:
    """``new`` (a replacement for ``old``) with the line endings it adds spelled ``newline``;
    those it keeps from ``old`` (found by a character alignment of the two) stay as they were:
    a lone ``\\r`` after a backslash in a file of ``\\n`` lines stays a ``\\r``."""
    endings = set(source.NEWLINE.findall(new))
    if not endings or endings | set(source.NEWLINE.findall(old)) == {newline}:
        return new
    where = [-1] * len(new)  # new's position -> old's, for the characters the alignment keeps
    for a, b, size in difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks():
        where[b:b + size] = range(a, a + size)
    out, last = [], 0
    for match in source.NEWLINE.finditer(new):
        at = where[match.start()]
        if at < 0 or where[match.end() - 1] != at + len(match.group()) - 1 or not _whole_ending(old, at, match.group()):
            out += [new[last:match.start()], newline]
            last = match.end()
    return "".join(out) + new[last:]


def _whole_ending(text: str, at: int, ending: str) -> bool:
    """Is ``text[at:]`` a whole line ending spelled ``ending`` (not half of a ``\\r\\n``)?"""
    if not text.startswith(ending, at):
        return False
    if ending == "\r":
        return not text.startswith("\n", at + 1)
    return ending != "\n" or at == 0 or text[at - 1] != "\r"


def _splice(text: str, groups: Iterable[list[_Span]]) -> str:
    for begin, end, replacement in sorted((s for group in groups for s in group), reverse=True):
        text = text[:begin] + replacement + text[end:]
    return text


def apply(text: str, findings: Iterable[Finding], unsafe: bool = False) -> tuple[str, int]:
    """(text with every non-overlapping fix applied, number of fixes applied).

    Only safe fixes are applied unless ``unsafe``. A fix whose edits do not fit ``text`` is
    skipped; if ``text`` compiles, a fix after which it would not is skipped too."""
    candidates = [f.fix for f in findings if f.fix is not None and f.fix.edits and (f.fix.safe or unsafe)]
    if not candidates:
        return text, 0
    starts = source.line_starts(text)
    newline = source.newline_of(text)
    fstrings = _fstring_quotes(text)
    chosen: list[tuple[int, int, list[_Span]]] = []
    for fix in candidates:
        spans = _spans(text, starts, fix.edits, newline, fstrings)
        if spans is None:
            continue
        low, high = min(a for a, _, _ in spans), max(b for _, b, _ in spans)
        if any(low < other_high and other_low < high for other_low, other_high, _ in chosen):
            continue
        if any(low == high == other_low == other_high for other_low, other_high, _ in chosen):
            continue  # two insertions at one place: their order would be arbitrary
        chosen.append((low, high, spans))
    if not chosen:
        return text, 0
    result = _splice(text, (group for _, _, group in chosen))
    if compiles(result) or not compiles(text):
        return result, len(chosen)
    kept: list[list[_Span]] = []  # some fix breaks the file: keep those that do not
    for _, _, group in chosen:
        if compiles(_splice(text, [*kept, group])):
            kept.append(group)
    return _splice(text, kept), len(kept)


def fix_text(text: str, path: str, select: Sequence[str], ignore: Sequence[str], unsafe: bool = False,
             passes: int = 5) -> tuple[str, int]:
    """(fixed text, fixes applied): lint (with ``# noqa``), apply, and again until no fix
    applies or ``passes`` runs out. Text that does not compile is returned unchanged."""
    from .runner import check_text

    if not compiles(text, path):
        return text, 0
    total = 0
    for _ in range(passes):
        text, count = apply(text, check_text(text, path, select, ignore), unsafe)
        total += count
        if not count:
            break
    return text, total


def fix_source(data: bytes, path: str, select: Sequence[str], ignore: Sequence[str], unsafe: bool = False,
               passes: int = 5) -> tuple[bytes, int]:
    """(fixed bytes in the file's own encoding, BOM and line endings, fixes applied).
    Undecodable files and files that do not compile are returned unchanged, as is a result
    that the file's encoding cannot hold; notebooks go through :func:`fix_notebook`."""
    if path.endswith(".ipynb"):
        new, count, _ = fix_notebook(data, path, select, ignore, unsafe, passes)
        return new, count
    try:
        decoded = source.decode(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return data, 0
    text, total = fix_text(decoded.text, path, select, ignore, unsafe, passes)
    if not total:
        return data, 0
    try:
        new = decoded.encode(text)
    except UnicodeEncodeError:
        return data, 0
    if not compiles(new, path):  # the cookie and the BOM, as Python will read them
        return data, 0
    return new, total


def fix_notebook(data: bytes, path: str, select, ignore, unsafe: bool = False, passes: int = 5):
    """(notebook bytes, fixes applied, [(cell number, source before, source after)]): the
    code cells fixed as one program (an import in one cell serves the others); outputs,
    metadata and the other cells are left as they were (:func:`devlint.notebook.fix`)."""
    from . import notebook

    program_path = path[: -len(".ipynb")] + ".py"
    return notebook.fix(data, lambda text: fix_text(text, program_path, select, ignore, unsafe, passes))


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Replace the file at ``path`` (a symlink: its target) by ``data``, all or nothing.

    The bytes go to a temporary file in the same folder, are flushed to disk, get the old
    file's permission bits, and the temporary file is renamed over the old one. Raises
    ``OSError`` (the old file untouched, the temporary file removed) when any step fails, and
    ``PermissionError`` before any step when the file is read-only: no write bit in its mode
    (``chmod 0444``; the rename would replace it, and root may write anything) or no write
    access for this user."""
    target = os.path.realpath(path)
    mode = stat.S_IMODE(os.stat(target).st_mode)
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
        raise PermissionError(errno.EACCES, "the file is read-only", str(path))
    folder, name = os.path.split(target)
    fd, temporary = tempfile.mkstemp(dir=folder or ".", prefix=f".{name}.", suffix=".devlint-tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
        try:
            directory = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        except OSError:
            pass


@dataclass(frozen=True)
class FileFix:
    """The outcome of fixing one file: its bytes ``before`` and ``after`` (equal when nothing
    applied), the number of fixes ``applied``, and ``error``, a DEV000 finding when the fixed
    file could not be written (the file is then unchanged). A file that cannot be read is
    left to the lint that follows, which reports it."""

    path: str
    before: bytes
    after: bytes
    applied: int
    error: Finding | None = None

    def diff(self) -> str:
        """The change as a unified diff (``a/path``, ``b/path``), cut into Python's lines."""

        def lines(data: bytes) -> list[str]:
            try:
                text = source.decode(data).text
            except (SyntaxError, UnicodeDecodeError, LookupError):
                text = data.decode("utf-8", "replace")
            return source.split_lines(text, keepends=True)

        return unified_diff(lines(self.before), lines(self.after), f"a/{self.path}", f"b/{self.path}")


def unified_diff(old: list[str], new: list[str], a: str, b: str) -> str:
    """A unified diff of two lists of lines (ends kept) that always ends in a newline: a last
    line without one is followed by ``\\ No newline at end of file``, as git and diff print it,
    instead of running into the next line of the diff."""
    import difflib

    def marked(lines: list[str]) -> list[str]:
        if lines and not lines[-1].endswith(("\n", "\r")):
            return [*lines[:-1], lines[-1] + "\n\\ No newline at end of file\n"]
        return lines

    return "".join(difflib.unified_diff(marked(old), marked(new), a, b))

