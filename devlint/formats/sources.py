"""The source lines of a finding's file (or notebook cell), as the formats that quote them
read them: from disk, or from :data:`SOURCES` for text that is not on disk as linted."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..finding import Finding

#: Source text of files that are not on disk as linted (standard input), by path.
SOURCES: dict[str, str] = {}


@lru_cache(maxsize=256)
def _lines(path: str, cell: int | None) -> tuple[str, ...]:
    if path in SOURCES:
        data = SOURCES[path].encode("utf-8")
        if cell is not None:
            from ..notebook import cell_lines

            return tuple(cell_lines(data, cell))
        from ..source import split_lines

        return tuple(split_lines(SOURCES[path]))
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ()
    if b"\x00" in data:  # a binary file: no raw bytes on the terminal
        return ()
    if cell is not None:
        from ..notebook import cell_lines

        return tuple(cell_lines(data, cell))
    from ..source import decode, split_lines

    try:
        return tuple(split_lines(decode(data).text))
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return tuple(split_lines(data.decode("utf-8", "replace")))


def source_line(finding: Finding) -> str | None:
    """The text of the line a finding starts on, read from its file (``None`` if unreadable)."""
    lines = source_lines(finding)
    return lines[finding.line - 1] if 0 < finding.line <= len(lines) else None


def source_lines(finding: Finding) -> tuple[str, ...]:
    """The lines of the file (or notebook cell) a finding is in; ``()`` if unreadable."""
    if finding.path == "-" and "-" not in SOURCES:
        return ()
    return _lines(finding.path, finding.cell)


def forget() -> None:
    """Drop the lines read so far (``--watch`` reads the files afresh on every pass)."""
    _lines.cache_clear()
