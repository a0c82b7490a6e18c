"""Jupyter notebooks (``.ipynb``): lint the code cells as one program.

The code cells are joined in order (a cell may use an import from an earlier one), IPython
magics and shell escapes (lines starting with ``%`` or ``!``) are blanked so that line numbers
stay put, and cells that start with a cell magic (``%%bash``...) are left out, except the
timing ones that still hold Python. Findings come back with ``cell`` set (1-based, counting
code cells only, as ruff does) and ``line`` relative to that cell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from .engine import PARSE_ERROR
from .finding import Finding

#: Cell magics whose body is still Python, so the cell is linted (without its first line).
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}


class NotebookError(ValueError):
    """The bytes are not a notebook this module understands."""


@dataclass(frozen=True)
class Notebook:
    """The code cells of a notebook: ``cells[i]`` is the source of code cell ``i + 1``."""

    cells: tuple[str, ...]

    def program(self) -> tuple[str, list[tuple[int, int]]]:
        """(the joined Python text, ``where[k]`` = (cell, line in cell) of joined line k+1)."""
        parts: list[str] = []
        where: list[tuple[int, int]] = []
        for number, source in enumerate(self.cells, 1):
            lines = source.splitlines()
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
    sources = []
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
    return Notebook(tuple(sources))


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
    return replace(finding, line=line, end_line=end_line, end_column=end_column, cell=cell)


def cell_lines(data: bytes | str, cell: int) -> list[str]:
    """The lines of code cell ``cell`` (1-based), or ``[]`` if there is none."""
    try:
        cells = parse(data).cells
    except NotebookError:
        return []
    return cells[cell - 1].splitlines() if 0 < cell <= len(cells) else []
