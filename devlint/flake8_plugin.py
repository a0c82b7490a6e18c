"""The flake8 front end: ``flake8 --select=DEV`` (or ``--extend-select=DEV``).

flake8 applies ``# noqa`` and selection itself; this class only turns lines into findings
through :func:`devlint.engine.lint`. It never raises: a file libcst cannot parse yields no DEV
finding (flake8 reports E999 for it), since one exception would abort the whole flake8 run.
When flake8's selection cannot keep any DEV code (e.g. ``--select=E9``), nothing is parsed.

Findings go through the CLI's content-hash cache (:mod:`devlint.cache`, in ``.devlint_cache/``
of the folder flake8 runs in, under a key of their own: these are taken before ``# noqa``,
which flake8 applies), with the project view (:mod:`devlint.project`) and its dependencies as
``devlint check`` keeps them: an unchanged file is not parsed again. ``--devlint-no-cache`` (or ``devlint-no-cache = true`` in flake8's configuration)
turns the cache off.
"""

from __future__ import annotations

import copy
import os
import sys
from typing import Any, ClassVar, Iterator

from . import __version__

#: Every code a rule could have (DEV001-DEV299): enough to ask flake8 whether any is selected
#: without importing libcst, which costs more than flake8's own start-up.
_CODES = tuple(f"DEV{n:03d}" for n in range(1, 300))


#: Set in the environment once the bare-``D`` warning is printed, so that flake8's worker
#: processes (which may parse the options again) stay quiet.
_WARNED = "DEVLINT_WARNED_BARE_D"


class DevlintChecker:
    """flake8 AST plugin (``flake8.extension`` entry point ``DEV``).

    ``tree`` is flake8's ``ast`` tree (libcst parses ``lines``, so stdin works; the tree only
    places findings cheaply);
    ``lines`` the file's lines; ``filename`` its path. Yields ``(line, col, "DEVnnn msg", type)``
    with a 0-based column."""

    name = "devlint"
    version = __version__
    _active: ClassVar[bool] = True
    _cached: ClassVar[bool] = True

    def __init__(self, tree: Any, lines: list[str], filename: str) -> None:
        self.tree, self.lines, self.filename = tree, lines, filename

    @staticmethod
    def add_options(parser: Any) -> None:
        """flake8's option ``--devlint-no-cache``: lint every file, keep nothing."""
        parser.add_option("--devlint-no-cache", action="store_true", default=False, parse_from_config=True,
                          help="devlint: do not read or write .devlint_cache/")

    @classmethod
    def parse_options(cls, options: Any) -> None:
        """Skip all work when flake8's ``--select``/``--ignore`` drop every DEV code, and warn
        once when a bare ``D`` in ``ignore``/``extend-ignore`` (pydocstyle's prefix) drops some."""
        cls._cached = not getattr(options, "devlint_no_cache", False)
        dropped: list[str] = []
        try:
            from flake8.style_guide import Decision, DecisionEngine

            engine = DecisionEngine(options)
            decisions = {code: engine.decision_for(code) for code in _CODES}
            cls._active = any(d is Decision.Selected for d in decisions.values())
            dropped = [code for code, d in decisions.items() if d is not Decision.Selected]
        except Exception:  # noqa: BLE001 - an unknown flake8 version: just run
            cls._active = True
        try:
            cls._warn_bare_d(options, dropped)
        except Exception:  # noqa: BLE001 - a warning must never break the user's flake8 run
            pass

    @staticmethod
    def _warn_bare_d(options: Any, dropped: list[str]) -> None:
        """One stderr line per run (worker processes inherit the marker) when ``D`` hides DEV."""
        if not dropped or os.environ.get(_WARNED):
            return
        listed = [*(getattr(options, "ignore", None) or ()), *(getattr(options, "extend_ignore", None) or ())]
        if not any(str(code).strip().upper() == "D" for code in listed):
            return
        from flake8.style_guide import Decision, DecisionEngine

        without_d = copy.copy(options)
        for name in ("ignore", "extend_ignore"):
            value = getattr(options, name, None)
            if value:
                setattr(without_d, name, [c for c in value if str(c).strip().upper() != "D"])
        from .rules import all_rules  # only on this rare path: it imports libcst

        engine = DecisionEngine(without_d)
        hidden = set(dropped)
        dropped = [r.code for r in all_rules() if r.code in hidden and engine.decision_for(r.code) is Decision.Selected]
        if not dropped:  # the selection drops them anyway (``select = E,F``): not D's doing
            return
        os.environ[_WARNED] = "1"
        print(
            f"devlint: flake8's ignore/extend-ignore holds a bare 'D' (pydocstyle), which also drops "
            f"{len(dropped)} DEV code(s): ignore pydocstyle's codes as D1,D2,D3,D4 instead, "
            f"or add extend-select = DEV",
            file=sys.stderr,
        )

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        if not self._active:
            return
        try:
            from .finding import PARSE_ERROR

            findings = self._findings()
        except Exception:  # noqa: BLE001 - never abort the user's flake8 run
            return
        for finding in findings:
            if finding.code != PARSE_ERROR:
                yield finding.line, finding.column, finding.text, type(self)

    def _findings(self) -> list:
        """The file's findings before ``# noqa``, from the cache when its text (and every
        project file they read) is unchanged; else linted, then stored."""
        from .project import view_for

        text = "".join(self.lines)
        alone = self.filename in ("stdin", "-")
        cache = None if alone or not self._cached else _cache()
        project = None if alone else view_for(self.filename, cache.folder if cache is not None else None)
        key = None
        if cache is not None:
            key = cache.key(os.path.abspath(self.filename), text.encode("utf-8", "surrogatepass"))
            found = cache.get(key, project.index.digest if project is not None else None)
            if found is not None:
                return found
        from .engine import lint  # imported only when a file is linted

        found = lint(text, self.filename, tree=self.tree, project=project)
        if cache is not None:
            cache.put(key, found, project.deps if project is not None else None)
        return found


_CACHES: dict = {}


def _cache():
    """The cache of the folder flake8 runs in, one per process (``None``: none to be had)."""
    from pathlib import Path

    from .cache import Cache
    from .settings import torch_version
    from .syntax import target_version

    root = Path.cwd()
    found = _CACHES.get(root)
    if found is None:
        # the CLI's settings salt, and a mark of its own: these findings precede # noqa
        salt = ["DEV", "@flake8", f"@torch-version={torch_version()}", f"@target-version={target_version()}"]
        found = _CACHES[root] = Cache(root, salt, ())
    return found
