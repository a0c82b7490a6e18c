"""Every rule, one per file. ``all_rules()`` imports each module here and returns the
:class:`devlint.rule.Rule` subclasses they define, sorted by code."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from ..rule import Rule


@lru_cache(maxsize=None)
def all_rules() -> tuple[type[Rule], ...]:
    """All rule classes, sorted by code. Raises ``ValueError`` if two share a code."""
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and value.__module__ == module.__name__:
                if value.code in found:
                    raise ValueError(f"two rules share code {value.code}")
                found[value.code] = value
    return tuple(found[c] for c in sorted(found))
