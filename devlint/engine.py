"""Source text -> findings: pre-screen, one libcst parse, one traversal for every rule.

``lint(source, path)`` is the single entry point every front end uses; this module is the
pipeline only. Its steps live in their own modules: what the target Python refuses
(:mod:`~devlint.syntax`), lines blanked before libcst (:mod:`~devlint.defuse`), the ``ast``
pre-check (:mod:`~devlint.precheck`), libcst's parse (:mod:`~devlint.parsing`,
:mod:`~devlint.parse_failures`), the walk (:mod:`~devlint.walk`, with
:mod:`~devlint.guard_tracking` and :mod:`~devlint.context`), and, only for files that have
findings, their positions (:mod:`~devlint.positions`) and fixes (:mod:`~devlint.fix_assembly`).
"""

from __future__ import annotations

import ast
import gc
import os
import sys
from typing import Sequence

import libcst as cst

from . import fix_assembly
from . import parse_failures
from . import parsing
from . import settings as torch_settings
from . import precheck as _precheck
from . import source as source_text
from . import syntax
from . import walk
from .context import Context
from .defuse import defuse
from .finding import PARSE_ERROR, Finding
from .guard_tracking import GuardTracker
from .positions import reported_ranges
from .resume import RESUME, ClassResume
from .rule import Analysis, Rule
from .rules import all_rules

#: Whether :func:`lint` runs the ``ast`` pre-check by default: set ``DEVLINT_NO_PRECHECK=1`` in
#: the environment to measure without it or to rule it out (benchmarks/bench_lint.py does both).
PRECHECK = not os.environ.get("DEVLINT_NO_PRECHECK")


def is_selected(code: str, select: Sequence[str] = ("DEV",), ignore: Sequence[str] = ()) -> bool:
    """Code-prefix selection, the most specific prefix winning (ruff's and flake8's rule):
    ``select=["DEV"], ignore=["DEV1"]`` drops DEV101 but ``select=["DEV101"]`` keeps it."""
    chosen = max((len(p) for p in select if code.startswith(p)), default=-1)
    dropped = max((len(p) for p in ignore if code.startswith(p)), default=-1)
    return chosen >= 0 and chosen > dropped


def enabled_rules(select: Sequence[str] = ("DEV",), ignore: Sequence[str] = ()) -> list[type[Rule]]:
    """Rule classes whose code the selection keeps."""
    return [r for r in all_rules() if is_selected(r.code, select, ignore)]


def triggered(text: str, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    """The rules whose text pre-screen this text passes (see ``Rule.triggers``)."""
    torch = "torch" in text
    return [r for r in rules if (torch or not r.needs_torch) and any(t in text for t in r.triggers)]


def lint(
    source: str | bytes,
    path: str = "<stdin>",
    select: Sequence[str] = ("DEV",),
    ignore: Sequence[str] = (),
    rules: Sequence[type[Rule]] | None = None,
    tree: ast.Module | None = None,
    precheck: bool | None = None,
    project=None,
) -> list[Finding]:
    """All findings of the selected rules in ``source``, sorted by position.

    Never raises on bad input: text that cannot be decoded or parsed gives one ``DEV000``
    finding at the failing line; an internal failure gives one ``DEV000`` naming it.
    ``noqa`` comments are *not* applied here (flake8 applies its own; the CLI applies
    :mod:`devlint.noqa`). ``tree``, the stdlib ``ast`` of the same text if the caller has it
    (flake8 does), saves a parse in the pre-check and when positions are resolved.

    Work is spared in three steps: a rule runs only on text holding one of its ``triggers``;
    then only if the stdlib ``ast`` of the file holds a candidate node for it
    (:mod:`devlint.precheck`); libcst parses the file only for the rules left. The garbage
    collector is off while libcst builds and the rules walk the tree (a tree holds no cycles;
    collecting passes over it made the cost per line grow with the file's length).
    ``precheck=False`` skips the ``ast`` step (the findings are the same; tests compare them);
    ``None`` follows :data:`PRECHECK`. ``project``, this file's
    :class:`devlint.project.index.View`, lets DEV111-DEV114 read the summaries of the
    project files it imports; the rules its imports make worth running
    (:meth:`~devlint.project.index.View.forced_rules`) then skip the pre-screen and pre-check."""
    rules = enabled_rules(select, ignore) if rules is None else rules
    try:
        text = source_text.decode(source).text if isinstance(source, bytes) else source
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return [parse_failures.undecodable(source, path, exc)]
    forced = project_rules(project, text, rules)
    every = rules
    rules = triggered(text, rules)
    if not rules and not forced:
        return []
    collecting = gc.isenabled()
    gc.disable()
    try:
        tree, refused, kept = syntax.refusal(text, tree)
        if refused is not None:
            line, column, reason = refused
            return [Finding(path, line, column, PARSE_ERROR, f"could not parse: {reason}, line {line}", line, column)]
        over = []
        if kept is not None:  # a long generated file: its first lines only
            text, total = _first_lines(text, kept)
            over = [Finding(path, kept + 1, 0, PARSE_ERROR, f"lines {kept + 1:,}-{total:,} skipped: over "
                            f"{syntax.budget_words()}, split the file", kept + 1, 0)]
        text, removed = syntax.for_libcst(text, tree)
        text, skipped = defuse(text, path)
        if skipped:
            tree = None  # the pre-check reads the text libcst gets
        skipped += over
        if PRECHECK if precheck is None else precheck:
            rules, tree = _precheck.candidates(text, rules, tree)
        if forced:
            rules = [r for r in every if r in forced or r in rules]
        if not rules:
            return syntax.restore(skipped, removed)
        given = [tree]
        del tree  # the stdlib tree of a long file is large: the callee drops it before libcst parses
        return syntax.restore(_parse_and_analyse(text, path, rules, given, skipped, project), removed)
    finally:
        if collecting:
            gc.enable()


def _first_lines(text: str, count: int) -> tuple[str, int]:
    """(the first ``count`` lines of ``text``, cut at ``\\n``, with their line endings;
    how many lines ``text`` has)."""
    at = -1
    for _ in range(count):
        at = text.index("\n", at + 1)
    return text[:at + 1], text.count("\n") + (not text.endswith("\n"))


def project_rules(project, text: str, rules: Sequence[type[Rule]], scan=None) -> set[type[Rule]]:
    """The rules among ``rules`` that the file's imports of the project make worth running
    whatever the pre-screen says (see :meth:`devlint.project.index.View.forced_rules`;
    ``scan``: a document's :class:`devlint.project.call_scan.CallScan`, or ``None``)."""
    if project is None:
        return set()
    try:
        codes = project.forced_rules(text, scan)
    except (OSError, ValueError, RecursionError):  # the index never stops a lint
        return set()
    return {r for r in rules if r.code in codes}


def _parse_and_analyse(text: str, path: str, rules, given: list, skipped: list[Finding], project=None) -> list[Finding]:
    """Parse with libcst and lint; ``given`` holds the stdlib tree (or ``None``), taken out so
    that no frame keeps it alive while libcst builds its own."""
    tree = given.pop()
    cuts = starts = None
    long = text.count("\n", 0, None) > parsing.CHUNK_LINES * 3 // 2 and "\r" not in text
    by_text = long and tree is None  # no stdlib tree (pre-check off): cut where the text says
    if tree is not None:
        cuts = parsing.cuts_by_tree(tree) if long else None
        starts = parsing.top_starts(tree)
    del tree  # the stdlib tree of a long file is large: keep only what positions need
    try:
        if by_text:
            module, starts = parsing.parse_by_text(text)  # cuts checked by the parse
        else:
            module = parsing.parse_in_pieces(text, cuts)
    except Exception as exc:  # noqa: BLE001 - ParserSyntaxError, or the native parser's own
        return [*skipped, parse_failures.parse_failure(text, path, exc)]
    return sorted([*skipped, *lint_module(module, text, path, rules=rules, tree=starts, project=project)],
                  key=Finding.order)


def lint_parsed_by(
    text: str,
    path: str,
    rules: Sequence[type[Rule]],
    parse,
    narrow=None,
    tree=None,
    positions: dict | None = None,
    project=None,
) -> tuple[list[Finding], Finding | None]:
    """The pipeline of :func:`lint` for a caller that keeps its own parse (the language
    server's per-statement cache). ``text`` (decoded, past the text pre-screen) has its
    pathological lines blanked (each a ``DEV000``) and the collector is off; then
    ``parse(body)`` returns the libcst module, ``narrow(body, rules)``, when given, returns
    the rules left by the ``ast`` pre-check (none left: no traversal), and the rules walk the
    module once; ``tree()``, when given, returns the ``tree`` of :func:`lint_module` (called
    only when the traversal runs), ``positions`` and ``project`` are as there.

    Returns (the findings sorted, the blanked lines' included; ``None``) or, when ``parse``
    raises an ``Exception``, (the blanked lines' findings, the ``DEV000`` at the parse error),
    except that with ``narrow`` given, a text in which :func:`devlint.precheck.candidates`
    finds no candidate rule reports no error, as :func:`lint` with its pre-check. No ``# noqa``
    applied. What ``narrow`` raises, and what ``parse`` raises that is no ``Exception``,
    propagates (a caller's cancellation)."""
    body, skipped = defuse(text, path)
    collecting = gc.isenabled()
    gc.disable()  # a full pass of the collector over a large tree costs more than the lint
    try:
        try:
            module = parse(body)
        except Exception as exc:  # noqa: BLE001 - ParserSyntaxError, or the native parser's own
            if narrow is not None and not _precheck.candidates(body, rules)[0]:
                return skipped, None  # no candidate rule (CPython parses it): nothing to report
            return skipped, parse_failures.parse_failure(body, path, exc)
        if narrow is not None:
            rules = narrow(body, rules)
            if not rules:
                return skipped, None
        stand_in = tree() if tree is not None else None
        return sorted([*skipped, *lint_module(module, body, path, rules=rules, tree=stand_in, positions=positions,
                                              project=project)], key=Finding.order), None
    finally:
        if collecting:
            gc.enable()


def lint_module(
    module: cst.Module,
    text: str,
    path: str = "<stdin>",
    select: Sequence[str] = ("DEV",),
    ignore: Sequence[str] = (),
    rules: Sequence[type[Rule]] | None = None,
    tree: ast.Module | list[int] | None = None,
    positions: dict | None = None,
    project=None,
) -> list[Finding]:
    """Findings of the selected rules in an already-parsed libcst ``module`` whose source is
    ``text`` (``module.code == text``), sorted by position; no pre-screen, no pre-check.

    For callers that keep their own parse (the language server's per-statement cache). Never
    raises: an internal failure gives one ``DEV000`` naming it. ``tree`` is as for :func:`lint`
    (or the first lines of its top-level statements). ``positions``, a dict the caller keeps
    between calls on the same document, memoises the positions of each top-level statement
    that had findings (see :func:`devlint.positions.reported_ranges`); a caller that re-uses unchanged statement nodes
    (immutable) then never renders them again. ``project`` is as for :func:`lint`."""
    rules = enabled_rules(select, ignore) if rules is None else rules
    if not rules:
        return []
    limit = sys.getrecursionlimit()
    collecting = gc.isenabled()
    gc.disable()
    try:
        sys.setrecursionlimit(max(limit, 20000))  # libcst's codegen recurses per nesting level
        return _analyse(module, path, text, rules, tree, positions, project)
    except Exception as exc:  # noqa: BLE001 - one bad file never aborts a run
        return [Finding(path, 1, 0, PARSE_ERROR, f"could not analyse: {type(exc).__name__}: {exc}", 1, 0)]
    finally:
        sys.setrecursionlimit(limit)
        if collecting:
            gc.enable()


def _analyse(module: cst.Module, path: str, text: str, rules: Sequence[type[Rule]], tree=None,
             memo: dict | None = None, project=None) -> list[Finding]:
    ctx = Context(path, text)
    ctx.project = project
    ctx.keep_between_lints(memo)
    analyses: list[Analysis] = []
    for rule in rules:
        for kind in rule.requires:
            if kind not in ctx._analyses:
                ctx._analyses[kind] = kind(ctx)
                analyses.append(ctx._analyses[kind])
    participants = [GuardTracker(ctx), *analyses, *(rule(ctx) for rule in rules)]
    try:
        visit, leave = walk.tables(participants)
        at = None
        if memo is not None:  # a document linted again: resume inside an edited class
            key = (tuple(type(p) for p in participants if not getattr(p, "stateless", False)),
                   torch_settings.torch_version(), syntax.target_version())
            at = memo.setdefault(RESUME, ClassResume()).hooks(module, ctx, participants, key)
        walk.walk(module, visit, leave, ctx, at)
        ctx.done_with_lint(memo)
        return _findings(module, path, text, ctx, tree, memo)
    finally:
        # The analyses and the reported rules point back at ``ctx``: cut those cycles so that
        # the tree is freed as soon as the caller drops it, not by a later collector pass over
        # every node of it (the collector is off while a file is linted).
        ctx._analyses.clear()
        ctx.reports.clear()
        ctx.scope = None
        participants.clear()


def _findings(module: cst.Module, path: str, text: str, ctx: Context, tree, memo: dict | None = None) -> list[Finding]:
    """The reports of a walk as positioned findings, with their fixes."""
    if not ctx.reports:
        return []
    wanted: dict[int, list] = {}
    for _, node, _, fix, index in ctx.reports:
        wanted.setdefault(index, []).append(node)
        if fix is not None:
            wanted[index].extend(n for n, _ in fix.replacements)
    positions = reported_ranges(module, text, wanted, tree, memo)
    findings = set()
    starts: list[int] = []
    for rule, node, message, fix, _ in ctx.reports:
        if fix is not None:
            starts = starts or source_text.line_starts(text)
            fix = fix_assembly.assemble(fix, positions, module, text, starts)
        where = positions.get(node)
        if where is None:
            continue
        findings.add(
            Finding(path, where.start.line, where.start.column, rule.code, message, where.end.line, where.end.column, fix)
        )
    return sorted(findings, key=Finding.order)
