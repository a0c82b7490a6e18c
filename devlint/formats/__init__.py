"""Output formats of ``devlint check --format``: one module per format, each with a
``render(findings, rules, root) -> str`` function.

``findings`` are the findings to report (``# noqa`` already applied), ``rules`` the rule
classes that ran, ``root`` the folder that machine-readable paths are made relative to (the
repository: SARIF, GitHub and GitLab want repository-relative paths). What several formats
write of a finding is in :mod:`~devlint.formats.fields`, the text of its lines in
:mod:`~devlint.formats.sources`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..finding import Finding
from ..format_names import ALIASES, NAMES  # apart: the command line reads them at start-up

if TYPE_CHECKING:  # annotations only: the rules (and libcst) are not loaded to write a report
    from ..rule import Rule

Renderer = Callable[[Sequence[Finding], Sequence["type[Rule]"], Path], str]


def get(name: str) -> Renderer:
    """The ``render`` function of the format called ``name`` (raises ``KeyError``)."""
    name = ALIASES.get(name, name)
    if name not in NAMES:
        raise KeyError(name)
    from importlib import import_module

    if name in ("full", "concise"):
        from functools import partial

        from .text import render

        return partial(render, full=name == "full")
    return import_module(f"{__name__}.{name.replace('-', '_')}").render
