"""Python source text: its encoding and its lines, as Python's own tokenizer sees them.

One notion of a *line* for every part of devlint (``# noqa``, notebooks, autofix): a line
ends at ``\\r\\n``, ``\\r`` or ``\\n`` and nowhere else. ``str.splitlines()`` also breaks at
``\\f``, ``\\v``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029, which Python (and libcst,
and flake8) treat as ordinary characters; counting lines that way shifts every later
position. Columns are 0-based and counted in code points of the decoded text, as libcst's
``PositionProvider`` counts them.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from itertools import accumulate

#: A line ending as Python's tokenizer knows it.
NEWLINE = re.compile(r"\r\n|\r|\n")
_FIRST_TWO_LINES = re.compile(rb"([^\r\n]*(?:\r\n|\r|\n)?)([^\r\n]*(?:\r\n|\r|\n)?)")


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """``text`` cut at ``\\r\\n``/``\\r``/``\\n`` only; a final line ending adds no empty line
    (as ``str.splitlines``). ``keepends`` keeps each line's ending."""
    parts = NEWLINE.split(text) if not keepends else _with_ends(text)
    if not keepends and parts and parts[-1] == "":
        parts.pop()
    return parts


#: what ``str.splitlines`` cuts at beyond ``\r``/``\n``: without them it cuts as :data:`NEWLINE`
_OTHER_BREAKS = re.compile("[\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def _with_ends(text: str) -> list[str]:
    if not _OTHER_BREAKS.search(text):  # in C (the loop below: 18 ms for 5,000 lines)
        return text.splitlines(keepends=True)
    lines, start = [], 0
    for match in NEWLINE.finditer(text):
        lines.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def line_starts(text: str) -> list[int]:
    """``starts[k]`` = offset in ``text`` of the first character of line ``k + 1``; one more
    entry than there are line endings (the last line may be empty)."""
    if not _OTHER_BREAKS.search(text):  # the lines' lengths summed in C
        starts = [0, *accumulate(map(len, text.splitlines(keepends=True)))]
        if text and text[-1] not in "\r\n":
            starts.pop()  # the last line has no ending
        return starts
    return [0, *(match.end() for match in NEWLINE.finditer(text))]


def offset(starts: list[int], text: str, line: int, column: int) -> int:
    """The offset of (1-based ``line``, 0-based ``column``), raising ``ValueError`` when the
    position is not inside ``text`` (a line that does not exist, a column past its end)."""
    if not 0 < line <= len(starts) or column < 0:
        raise ValueError(f"no position {line}:{column}")
    begin = starts[line - 1]
    body = text[begin:starts[line] if line < len(starts) else len(text)]
    length = len(body) - (2 if body.endswith("\r\n") else 1 if body.endswith(("\r", "\n")) else 0)
    if column > length:
        raise ValueError(f"column {column} is past the end of line {line}")
    return begin + column


def newline_of(text: str) -> str:
    """The file's line ending: its first one, ``"\\n"`` when it has none."""
    match = NEWLINE.search(text)
    return match.group() if match else "\n"


def tokenizer_text(text: str) -> str:
    """``text`` with every line ending spelled ``\\n``: the same lines and columns, in the form
    the stdlib ``tokenize`` module (which reads lines at ``\\n`` only) splits correctly."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def generate_tokens(text: str):
    """``tokenize.generate_tokens`` over ``text``, lines counted as Python counts them."""
    return tokenize.generate_tokens(io.StringIO(tokenizer_text(text)).readline)


@dataclass(frozen=True)
class Decoded:
    """A file's bytes as text: ``text`` without the BOM, the ``encoding`` its coding cookie
    (or UTF-8) names, and whether it had a UTF-8 ``bom``. :meth:`encode` gives the bytes back."""

    text: str
    encoding: str
    bom: bool = False

    def encode(self, text: str | None = None) -> bytes:
        """``text`` (default: this text) in the file's own encoding, with its BOM if it had one.
        Raises ``UnicodeEncodeError`` if a character does not fit the encoding."""
        body = self.text if text is None else text
        return (("\ufeff" if self.bom else "") + body).encode(self.encoding)


def decode(data: bytes) -> Decoded:
    """Bytes -> :class:`Decoded`, honouring a PEP 263 coding cookie and a BOM.

    Raises ``SyntaxError`` for an unknown or conflicting encoding, ``UnicodeDecodeError``
    for bytes that do not decode."""
    first_two = iter(_FIRST_TWO_LINES.match(data).groups())  # the cookie's lines, cut as Python cuts them
    encoding, _ = tokenize.detect_encoding(lambda: next(first_two, b""))
    text = data.decode(encoding)  # "utf-8-sig" drops the BOM
    if encoding == "utf-8-sig":
        return Decoded(text, "utf-8", True)
    return Decoded(text, encoding)
