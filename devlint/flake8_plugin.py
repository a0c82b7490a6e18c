"""The flake8 front end: ``flake8 --select=DEV`` (or ``--extend-select=DEV``).

flake8 applies ``# noqa`` and selection itself; this class only turns lines into findings
through :func:`devlint.engine.lint`. It never raises: a file libcst cannot parse yields no DEV
finding (flake8 reports E999 for it), since one exception would abort the whole flake8 run.
When flake8's selection cannot keep any DEV code (e.g. ``--select=E9``), nothing is parsed.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterator

from . import __version__
from .engine import PARSE_ERROR, lint
from .rules import all_rules


class DevlintChecker:
    """flake8 AST plugin (``flake8.extension`` entry point ``DEV``).

    ``tree`` is flake8's ``ast`` tree (unused: libcst parses ``lines``, so stdin works);
    ``lines`` the file's lines; ``filename`` its path. Yields ``(line, col, "DEVnnn msg", type)``
    with a 0-based column."""

    name = "devlint"
    version = __version__
    _active: ClassVar[bool] = True

    def __init__(self, tree: Any, lines: list[str], filename: str) -> None:
        self.lines, self.filename = lines, filename

    @classmethod
    def parse_options(cls, options: Any) -> None:
        """Skip all work when flake8's ``--select``/``--ignore`` drop every DEV code."""
        try:
            from flake8.style_guide import Decision, DecisionEngine

            engine = DecisionEngine(options)
            cls._active = any(engine.decision_for(r.code) is Decision.Selected for r in all_rules())
        except Exception:  # noqa: BLE001 - an unknown flake8 version: just run
            cls._active = True

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        if not self._active:
            return
        try:
            findings = lint("".join(self.lines), self.filename)
        except Exception:  # noqa: BLE001 - never abort the user's flake8 run
            return
        for finding in findings:
            if finding.code != PARSE_ERROR:
                yield finding.line, finding.column, finding.text, type(self)
