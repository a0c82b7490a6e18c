"""Jupyter notebooks (``.ipynb``): lint the code cells as one program.

The code cells are joined in order (a cell may use an import from an earlier one), IPython
magics and shell escapes (lines starting with ``%`` or ``!``) are blanked so that line numbers
stay put, and cells that start with a cell magic (``%%bash``...) are left out, except the
timing ones that still hold Python. Findings come back with ``cell`` set (1-based, the
cell's place among *all* cells, markdown included, as ruff counts it) and ``line`` relative to
that cell. :func:`fix` applies autofixes to the code cells and writes the notebook back with
everything else (outputs, metadata, other cells) untouched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from .finding import PARSE_ERROR, Finding
from .source import split_lines

#: Cell magics whose body is still Python, so the cell is linted (without its first line).
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}


class NotebookError(ValueError):
    """The bytes are not a notebook this module understands."""


@dataclass(frozen=True)
class Notebook:
    """The code cells of a notebook: ``cells[i]`` is the source of the ``i``-th code cell,
    which is cell number ``numbers[i]`` (1-based, among all cells)."""

    cells: tuple[str, ...]
    numbers: tuple[int, ...] = ()

    def number(self, index: int) -> int:
        """The cell number of code cell ``index`` (0-based among code cells)."""
        return self.numbers[index] if index < len(self.numbers) else index + 1

    def program(self) -> tuple[str, list[tuple[int, int]]]:
        """(the joined Python text, ``where[k]`` = (cell, line in cell) of joined line k+1)."""
        parts: list[str] = []
        where: list[tuple[int, int]] = []
        for index, source in enumerate(self.cells):
            number = self.number(index)
            lines = split_lines(source)
            python = _python_lines(lines)
            for offset, line in enumerate(python, 1):
                parts.append(line + "\n")
                where.append((number, offset))
        return "".join(parts), where


def _python_lines(lines: list[str]) -> list[str]:
    """The cell's lines with magics blanked (same count), or all blank for a non-Python cell."""
    first = lines[0].strip() if lines else ""
    if first.startswith("%%"):
        magic = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if magic not in PYTHON_CELL_MAGICS:
            return [""] * len(lines)
        return [""] + [_blank_magic(line) for line in lines[1:]]
    return [_blank_magic(line) for line in lines]


def _blank_magic(line: str) -> str:
    stripped = line.lstrip()
    if stripped.startswith(("%", "!")):
        return ""
    return line


def parse(data: bytes | str) -> Notebook:
    """The code cells of an nbformat 4 notebook (raises :class:`NotebookError`)."""
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise NotebookError(f"not valid JSON: {exc}") from None
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("no list of cells")
    sources, numbers = [], []
    for index, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {index} is not an object")
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"cell {index} has no text source")
        sources.append(source)
        numbers.append(index)
    return Notebook(tuple(sources), tuple(numbers))


def check(
    data: bytes,
    path: str,
    check_source: Callable[[bytes, str, Sequence[str], Sequence[str]], list[Finding]],
    select: Sequence[str],
    ignore: Sequence[str],
) -> list[Finding]:
    """Findings of a notebook's bytes, through ``check_source`` (lint plus ``# noqa``), each
    placed in its cell. A malformed notebook gives one DEV000 and never raises."""
    try:
        notebook = parse(data)
    except NotebookError as exc:
        return [Finding(path, 1, 0, PARSE_ERROR, f"could not read notebook: {exc}", 1, 0)]
    text, where = notebook.program()
    findings = check_source(text.encode(), path, select, ignore)
    return [_place(finding, where) for finding in findings]


def _place(finding: Finding, where: list[tuple[int, int]]) -> Finding:
    if not where:
        return replace(finding, cell=1)
    cell, line = where[min(max(finding.line, 1), len(where)) - 1]
    end_cell, end_line = where[min(max(finding.end_line or finding.line, 1), len(where)) - 1]
    end_column = finding.end_column
    if end_cell != cell:  # a span never crosses cells; clamp to the start line
        end_line, end_column = line, finding.column
    return replace(finding, line=line, end_line=end_line, end_column=end_column, cell=cell,
                   fix=_place_fix(finding.fix, where))


def _place_fix(fix, where: list[tuple[int, int]]):
    """The fix with each edit's lines counted within its own cell, as the finding's are (the
    fix itself is applied to the joined program by :func:`fix`, not through these)."""
    if fix is None:
        return None

    def at(line: int) -> int:
        return where[min(max(line, 1), len(where)) - 1][1]

    return replace(fix, edits=tuple(replace(e, line=at(e.line), end_line=at(e.end_line)) for e in fix.edits))


def cell_lines(data: bytes | str, cell: int) -> list[str]:
    """The lines of cell number ``cell`` (1-based, among all cells) if it is a code cell, or
    ``[]``."""
    try:
        notebook = parse(data)
    except NotebookError:
        return []
    if cell in notebook.numbers:
        return split_lines(notebook.cells[notebook.numbers.index(cell)])
    return []


# -- autofix --------------------------------------------------------------------------------

_CELL = "# devlint: cell boundary {}"
_MAGIC = "# devlint: magic {}"


def _fix_program(notebook: Notebook) -> tuple[str, list[str]]:
    """The code cells as one program for the fixer: a sentinel comment line between cells,
    each magic line replaced by a numbered comment (same indentation), a cell magic's whole
    cell by one comment. Returns (program, the replaced lines in order)."""
    parts, magics = [], []
    for index, source in enumerate(notebook.cells):
        parts.append(_CELL.format(index) + "\n")
        lines = split_lines(source, keepends=True)
        first = lines[0].strip() if lines else ""
        if first.startswith("%%") and (first[2:].split(maxsplit=1) or [""])[0] not in PYTHON_CELL_MAGICS:
            magics.append("")  # not Python: the whole cell is kept as it is
            parts.append(_MAGIC.format(len(magics) - 1) + "\n")
            continue
        for number, line in enumerate(lines):
            stripped = line.lstrip()
            if stripped.startswith(("%", "!")) or (number == 0 and first.startswith("%%")):
                body = line.rstrip("\r\n")
                magics.append(body)
                parts.append(line[: len(line) - len(stripped)] + _MAGIC.format(len(magics) - 1) + line[len(body):])
            else:
                parts.append(line)
        if lines and not lines[-1].endswith(("\n", "\r")):
            parts.append("\n")
    return "".join(parts), magics


def _split_program(text: str, notebook: Notebook, magics: list[str]) -> list[str] | None:
    """The cell sources back from a fixed program (``None`` if a sentinel was lost)."""
    import re

    chunks = re.split(r"^# devlint: cell boundary (\d+)\n", text, flags=re.M)
    if chunks[0] or [int(n) for n in chunks[1::2]] != list(range(len(notebook.cells))):
        return None
    used: list[int] = []

    def restore(match: "re.Match[str]") -> str:
        used.append(int(match.group(2)))
        return match.group(1) + magics[int(match.group(2))] if int(match.group(2)) < len(magics) else match.group(0)

    cells = []
    for original, chunk in zip(notebook.cells, chunks[2::2]):
        whole = re.fullmatch(r"# devlint: magic (\d+)\n", chunk)
        if whole and not magics[int(whole.group(1))]:
            used.append(int(whole.group(1)))
            cells.append(original)
            continue
        chunk = re.sub(r"^([ \t]*)# devlint: magic (\d+)", restore, chunk, flags=re.M)
        if not original.endswith(("\n", "\r")) and chunk.endswith("\n"):
            chunk = chunk[:-1]
        cells.append(chunk)
    if sorted(used) != list(range(len(magics))):
        return None
    return cells


def fix(data: bytes, fix_text: Callable[[str], tuple[str, int]]) -> tuple[bytes, int, list[tuple[int, str, str]]]:
    """Apply ``fix_text`` (program text -> (fixed text, fixes applied)) to a notebook's code
    cells. Returns (notebook bytes, fixes applied, [(cell number, before, after)] of the cells
    that changed); the bytes are the input itself when nothing changed or the notebook cannot
    be read. Only changed cells' ``source`` is rewritten, in the notebook's own JSON layout
    (indentation, key order, non-ASCII kept), so outputs and metadata stay as they were."""
    try:
        notebook = parse(data)
        document = json.loads(data)
    except (NotebookError, ValueError, RecursionError):
        return data, 0, []
    program, magics = _fix_program(notebook)
    fixed, count = fix_text(program)
    if not count or fixed == program:
        return data, 0, []
    cells = _split_program(fixed, notebook, magics)
    if cells is None:
        return data, 0, []
    changed = []
    for index, (before, after) in enumerate(zip(notebook.cells, cells)):
        if before == after:
            continue
        number = notebook.number(index)
        cell = document["cells"][number - 1]
        lines = after.splitlines(keepends=True)
        cell["source"] = lines if isinstance(cell.get("source"), list) else after
        changed.append((number, before, after))
    if not changed:
        return data, 0, []
    text = data.decode("utf-8")
    indent = _indent(text)
    out = json.dumps(document, indent=indent, ensure_ascii="\\u" in text and not _has_non_ascii(text))
    if text.endswith("\n"):
        out += "\n"
    return out.encode("utf-8"), count, changed


def _indent(text: str) -> int | None:
    """The JSON indentation of a notebook file (nbformat writes 1)."""
    second = text.split("\n", 2)[1] if text.count("\n") >= 2 else ""
    width = len(second) - len(second.lstrip(" "))
    return width or None


def _has_non_ascii(text: str) -> bool:
    return any(ord(c) > 127 for c in text)
