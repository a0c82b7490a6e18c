"""No import circle inside devlint.runtime, lazy imports (inside functions) included: TARGET
loading lives in runtime/target.py, so cli -> runs -> distributed no longer leads back to cli,
and runtime/frameworks.py does not import runtime/step.py, which imports it."""

from __future__ import annotations

import ast

from conftest import ROOT

PACKAGE = ROOT / "devlint" / "runtime"


def imports_of(path) -> set[str]:
    """The sibling modules ``path`` imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def test_no_import_circle_in_runtime():
    graph = {p.stem: imports_of(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    graph = {m: {t for t in targets if t in graph} for m, targets in graph.items()}

    def reaches(start: str, goal: str, seen: set) -> bool:
        for nxt in graph[start]:
            if nxt == goal or (nxt not in seen and (seen.add(nxt) or reaches(nxt, goal, seen))):
                return True
        return False

    assert [m for m in graph if reaches(m, m, set())] == []
    assert "cli" not in graph["distributed"] and "target" in graph["distributed"]
