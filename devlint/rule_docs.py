"""A rule's docs, and the docs of every rule read from the rule files without importing them.

A rule's docs are its class's literal attributes (code, name, message, the prose, the first
flagged and clean example) and its docstring's first line. :func:`markdown` writes them in
ruff's sections; :meth:`devlint.rule.Rule.docs` is that function of the class. ``devlint rule``
needs no checker, so :func:`read_all` takes the same attributes from each file of
:mod:`devlint.rules` with the stdlib ``ast`` (``ast.literal_eval``), importing neither the rules
nor libcst; ``tests/test_rule_docs.py`` holds both readings equal for every rule.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

#: The fix safety of a rule that states none.
NO_AUTOFIX = "This rule has no autofix."


@dataclass(frozen=True)
class RuleDocs:
    """The documented attributes of one rule class, as :func:`markdown` reads them."""

    code: str
    name: str
    message: str
    doc: str | None = None
    what_it_does: str = ""
    why_bad: str = ""
    fix_safety: str = NO_AUTOFIX
    flagged: tuple[str, ...] = ()
    clean: tuple[str, ...] = ()

    def summary(self) -> str:
        """First line of the class docstring (the name where there is none)."""
        return summary(self.doc, self.name)


def summary(doc: str | None, name: str) -> str:
    """First line of a class docstring ``doc``, or ``name`` where there is none."""
    return doc.strip().splitlines()[0] if doc else name


def markdown(rule) -> str:
    """The docs of ``rule`` (a rule class or a :class:`RuleDocs`) in ruff's sections, as Markdown."""
    parts = [f"# {rule.name} ({rule.code})", "", rule.summary(), ""]
    parts += ["## What it does", rule.what_it_does.strip(), ""]
    parts += ["## Why is this bad?", rule.why_bad.strip(), ""]
    if rule.flagged:
        parts += ["## Example", "```python", rule.flagged[0].strip("\n"), "```", ""]
    if rule.clean:
        parts += ["## Use instead", "```python", rule.clean[0].strip("\n"), "```", ""]
    parts += ["## Fix safety", rule.fix_safety.strip(), ""]
    parts += ["## Message", f"`{rule.code} {rule.message}`", ""]
    return "\n".join(parts)


_FIELDS = frozenset(f for f in RuleDocs.__dataclass_fields__ if f != "doc")


@lru_cache(maxsize=None)
def read_all() -> tuple[RuleDocs, ...]:
    """The docs of every rule in :mod:`devlint.rules`, sorted by code: each class of a rule file
    that assigns a literal ``code`` is a rule. Raises ``ValueError`` where an attribute is not
    a literal (the rule files state their docs as literals)."""
    found = []
    for path in sorted(Path(__file__).with_name("rules").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
            if isinstance(node, ast.ClassDef):
                values = _literals(node, path)
                if "code" in values:
                    found.append(RuleDocs(doc=ast.get_docstring(node, clean=False), **values))
    return tuple(sorted(found, key=lambda docs: docs.code))


def _literals(node: ast.ClassDef, path: Path) -> dict:
    values = {}
    for statement in node.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in _FIELDS:
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                raise ValueError(f"{path.name}:{statement.lineno}: {node.name}.{target.id} is not a literal") from None
    return values
