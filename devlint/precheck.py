"""The ``ast`` pre-check: which rules could report anything in this file, before libcst parses it.

CPython's own parser builds a stdlib ``ast`` in about a tenth of the time libcst takes for
the same text, and most files that mention torch hold nothing a rule reports. One walk over
that tree collects :class:`Facts` (the calls by method and by name, the string literals, the
keyword arguments, the imports...), and each rule's ``candidate`` predicate (declared next to
its detection logic, in the rule's own file) reads them to say whether the file holds a node
the rule could report on. A rule without a predicate is always a candidate, so a rule added
later is never lost; libcst parses the file only for the candidate rules, and only if there is
one.

A predicate must be a necessary condition of every finding of its rule, on the raw
syntax: it over-approximates (imports anywhere in the file count, guards are ignored) and
never needs the libcst tree. ``tests/test_precheck.py`` lints every fixture, every public
case and the benchmark corpus with and without the pre-check and compares the findings.
"""

from __future__ import annotations

import ast
from typing import Sequence

from .precheck_cpu_flow import CpuFlow
from .precheck_predicates import (Facts, Unit, arguments, builds_module, calls_in, dotted, has_backward, may_augment,
                                  may_move, methods_of, module_class, nodes_under, own_nodes, resolves_to,
                                  strip_module_methods, surely_guarded_calls, top_functions, torch_dtype, unit_may_move,
                                  walk)

#: The rules import the shared predicates from here too (they live in ``precheck_predicates``).
__all__ = ["Unit", "Facts", "candidates", "CpuFlow", "arguments", "builds_module", "calls_in", "dotted",
           "has_backward", "may_augment", "may_move", "methods_of", "module_class", "nodes_under", "own_nodes",
           "resolves_to", "strip_module_methods", "surely_guarded_calls", "top_functions", "torch_dtype",
           "unit_may_move", "walk"]

def candidates(text: str, rules: Sequence[type], tree: ast.Module | None = None,
               facts: Facts | None = None) -> tuple[list[type], ast.Module | None]:
    """``(the rules that could report in this file, its stdlib ast or None)``.

    A rule whose ``candidate`` is ``None`` is always kept, and so is every rule when the
    stdlib cannot parse the text (libcst then reports the syntax error, as without the
    pre-check) or a predicate raises. ``facts``, the :class:`Facts` of ``tree`` if the caller
    has them (the language server joins them per statement), saves the walk."""
    if all(getattr(r, "candidate", None) is None for r in rules):
        return list(rules), tree
    if facts is not None and tree is None:
        tree = facts.tree
    if tree is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return list(rules), None
    try:
        facts = Facts(tree, text) if facts is None else facts
    except (RecursionError, MemoryError):  # pragma: no cover - an iterative walk
        return list(rules), tree
    kept = []
    for rule in rules:
        test = getattr(rule, "candidate", None)
        try:
            keep = test is None or bool(test(facts))
        except Exception:  # noqa: BLE001 - a faulty predicate must not lose findings
            keep = True
        if keep:
            kept.append(rule)
    return kept, tree
