"""Positions as the editor counts them: lines split as LSP splits them, and columns converted
between code points (what the engine reports) and the client's units (UTF-16 code units unless
the client negotiated UTF-8 or UTF-32)."""

from __future__ import annotations


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their endings (``\\n``, ``\\r\\n`` or ``\\r``, as LSP counts)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def to_units(line: str, column: int, encoding: str = "utf-16") -> int:
    """Code-point ``column`` of ``line`` in the client's units (a lone surrogate is one unit)."""
    head = line[:column]
    if encoding == "utf-32":
        return len(head)
    if encoding == "utf-8":
        return len(head.encode("utf-8", "surrogatepass"))
    return len(head.encode("utf-16-le", "surrogatepass")) // 2


def from_units(line: str, units: int, encoding: str = "utf-16") -> int:
    """The code-point column of ``line`` at ``units`` client units (clamped to the line)."""
    if encoding == "utf-32":
        return min(max(units, 0), len(line))
    count = 0
    for index, ch in enumerate(line):
        if count >= units:
            return index
        point = ord(ch)
        if encoding == "utf-8":
            count += 1 if point < 0x80 else 2 if point < 0x800 else 3 if point < 0x10000 else 4
        else:
            count += 2 if point >= 0x10000 else 1
    return len(line)


def line_column(text: str, offset: int) -> tuple[int, int]:
    """(1-based line, code-point column) of ``offset`` in ``text``, lines as LSP counts them."""
    head = split_lines(text[:offset])
    return len(head), len(head[-1])
