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


@dataclass(frozen=True, order=True, init=False)
class Finding:
    """One diagnostic: where (1-based line, 0-based column, end exclusive), which code, what.

    ``message`` excludes the code; :attr:`text` gives the ``"DEV101 ..."`` form front ends print.
    Frozen; its ``__init__`` fills the instance dict in one step (the dataclass's own frozen
    ``__init__`` makes one ``object.__setattr__`` call per field, a third of a run's cost per
    finding in a file of 15k findings); ``dataclasses.replace`` and pickling work as before.
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

    def __init__(self, path: str, line: int, column: int, code: str, message: str, end_line: int = 0,
                 end_column: int = 0, fix: Fix | None = None, cell: int | None = None) -> None:
        self.__dict__.update(path=path, line=line, column=column, code=code, message=message, end_line=end_line,
                             end_column=end_column, fix=fix, cell=cell)

    def with_path(self, path: str) -> "Finding":
        """This finding under another ``path`` (``dataclasses.replace(self, path=path)``, without
        its per-field work: a run over one file of 15k findings moves every one to its display
        path)."""
        moved = object.__new__(self.__class__)
        moved.__dict__.update(self.__dict__)
        moved.__dict__["path"] = path
        return moved

    def order(self) -> tuple:
        """The fields the dataclass order compares (``fix`` excluded), as one tuple: a sort
        key equal to that order, without a Python ``__lt__`` call per comparison."""
        return (self.path, self.line, self.column, self.code, self.message, self.end_line, self.end_column, self.cell)

    @property
    def text(self) -> str:
        """``"CODE message"``, the form flake8 and the text output show."""
        return f"{self.code} {self.message}"
