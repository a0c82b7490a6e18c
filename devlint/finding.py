"""The one data type every front end consumes: a :class:`Finding`."""

from __future__ import annotations

from dataclasses import dataclass, field

#: The code of a file no rule could check: it could not be read, decoded or parsed (or one
#: line was too pathological to analyse); reported by every front end, never selectable off.
PARSE_ERROR = "DEV000"


@dataclass(frozen=True)
class Edit:
    """Replace the text between two positions (1-based lines, 0-based columns) by ``text``.

    ``original``, when known, is the text the edit expects to find there: an edit whose
    positions point elsewhere is then not applied (:mod:`devlint.fix`)."""

    line: int
    column: int
    end_line: int
    end_column: int
    text: str
    original: str | None = None


@dataclass(frozen=True)
class Fix:
    """An autofix: a few words on what it does, its edits, and whether it is safe.

    A *safe* fix keeps the program's behaviour on every device; an unsafe one may change it
    and is applied only with ``--unsafe-fixes`` (ruff's terms).
    """

    description: str
    edits: tuple[Edit, ...]
    safe: bool = True


@dataclass(frozen=True, order=True)
class Finding:
    """One diagnostic: where (1-based line, 0-based column, end exclusive), which code, what.

    ``message`` excludes the code; :attr:`text` gives the ``"DEV101 ..."`` form front ends print.
    """

    path: str
    line: int
    column: int
    code: str
    message: str
    end_line: int = 0
    end_column: int = 0
    fix: Fix | None = field(default=None, compare=False)
    #: The 1-based code-cell number when ``path`` is a Jupyter notebook; ``line`` is then
    #: relative to that cell.
    cell: int | None = None

    def with_path(self, path: str) -> "Finding":
        """This finding under another ``path``: ``dataclasses.replace(self, path=path)`` without its
        look-up of the fields (a run over one file of 15k findings moves every one to its
        display path: 84 -> 40 ms)."""
        return self.__class__(path, self.line, self.column, self.code, self.message, self.end_line, self.end_column,
                              self.fix, self.cell)

    def order(self) -> tuple:
        """The fields the dataclass order compares (``fix`` excluded), as one tuple: a sort
        key equal to that order, without a Python ``__lt__`` call per comparison."""
        return (self.path, self.line, self.column, self.code, self.message, self.end_line, self.end_column, self.cell)

    @property
    def text(self) -> str:
        """``"CODE message"``, the form flake8 and the text output show."""
        return f"{self.code} {self.message}"
