"""Linting one editor buffer (no LSP here: the lint thread and the benchmark call it).

A buffer is linted as ``devlint check`` lints the file (its settings, ``# noqa``) through the
engine's one pipeline for callers that parse themselves
(:func:`devlint.engine.lint_parsed_by`), with a per-statement parse cache
(:class:`devlint.incremental.StatementCache`) kept per document, so an edit re-parses only the
statements it touches. A lint polls a ``cancelled()`` callable and stops at the next statement
once its text went stale.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from .. import memory_budget, noqa, settings as torch_settings, syntax
from ..engine import enabled_rules, lint, lint_parsed_by, project_rules, triggered
from ..finding import PARSE_ERROR, Finding
from ..incremental import StatementCache
from ..notebook import Notebook
from ..precheck import candidates
from ..project.call_scan import CallScan
from .budget_counts import PieceCounts
from .noqa_lines import LineGroups
from .settings import Settings, excluded

logger = logging.getLogger(__name__)


class _Refused(Exception):
    """What the target Python refuses in a text libcst parsed: ``finding``, the ``DEV000``
    ``devlint check`` reports (raised by the pre-check step, caught in :func:`lint_text`)."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def _refused(body: str, clean: str, name: str, cache: StatementCache) -> Finding | None:
    """The ``DEV000`` of what the target Python refuses in ``clean`` (whose libcst parse,
    of ``body``, ``cache`` holds), as :func:`devlint.engine.lint` reports it; judged per
    changed statement (:meth:`StatementCache.accepted`) and, when something is refused, by
    :func:`devlint.syntax.refusal` on the whole text, which places it as ``devlint check`` does."""
    if body == clean and cache.accepted(syntax.target_version(), syntax.accepts):
        return None
    _, refused, _ = syntax.refusal(clean)
    if refused is None:
        return None
    line, column, reason = refused
    return Finding(name, line, column, PARSE_ERROR, f"could not parse: {reason}, line {line}", line, column)


def _cli_only(text: str, count=None) -> bool:
    """Is ``text`` one the server leaves to ``devlint check``'s own pipeline: a NUL character
    (refused at it), a form feed in a statement's indentation (removed before libcst parses,
    :func:`devlint.syntax.for_libcst`) or over the memory budget, by the decision the CLI takes
    (:func:`devlint.memory_budget.over_budget`; ``count``: the document's
    :class:`devlint.lsp.budget_counts.PieceCounts`)?"""
    return ("\0" in text or ("\f" in text and bool(syntax.for_libcst(text, None)[1]))
            or memory_budget.over_budget(text, count))


class Cancelled(BaseException):
    """Raised inside a lint whose text went stale (see ``lint_text(cancelled=...)``). A
    ``BaseException``, so that the engine's guard against internal errors (which turns any
    ``Exception`` into a ``DEV000``) lets it through."""


def _watcher(cancelled: Callable[[], bool]):
    """A participant of the engine's one traversal that raises :class:`Cancelled` at the
    first statement visited after ``cancelled()`` turns true. It reports nothing."""
    from ..rule import Participant

    def check(self, node=None) -> None:
        if cancelled():
            raise Cancelled()

    names = ("SimpleStatementLine", "FunctionDef", "ClassDef", "If", "For", "While", "With", "Try", "TryStar", "Match")
    hooks = {f"visit_{n}": check for n in names}
    # no state to resume; ``poll`` is asked before a resumed walk copies or compares its state
    return type("StaleLintWatcher", (Participant,), {**hooks, "stateless": True, "poll": check})


@dataclass
class DocumentState:
    """What a document keeps between lints: its statement cache and the last text that parsed
    with its findings (kept for the lines that do not change while the text does not parse)."""

    cache: StatementCache = field(default_factory=StatementCache)
    good_text: str | None = None
    good_findings: list[Finding] = field(default_factory=list)
    #: rendered positions of top-level statements with findings (``lint_module(positions=)``),
    #: and what the analyses keep per node between lints (``Context.remembered``)
    positions: dict = field(default_factory=dict)
    #: whether the next lint runs the ``ast`` pre-check: on a new text (the first lint, a full
    #: parse), then for as long as it left no rule to run (it spared the parse's traversal);
    #: once a rule is a candidate the traversal runs anyway and the pre-check would only add
    #: its cost. The findings are the same either way (the pre-check is exact).
    precheck: bool = True
    #: what a lint of a text that does not parse publishes (set by :func:`lint_text`)
    broken: list[Finding] = field(default_factory=list)
    #: other project files the last findings read -> their content hash then
    #: (:mod:`devlint.project`): when one changes, the document is linted again
    deps: dict = field(default_factory=dict)
    #: ``# noqa``'s line map, re-tokenized around each edit only
    noqa_lines: LineGroups = field(default_factory=LineGroups)
    #: the calls of imported names the project's forced-rule scan looks up, searched again
    #: around each edit only
    calls: CallScan = field(default_factory=CallScan)
    #: the memory budget's token counts, counted again around each edit only
    budget_counts: PieceCounts = field(default_factory=PieceCounts)


def _clean(text: str) -> str:
    """``text`` with lone surrogates (which no parser takes) replaced by U+FFFD: the same
    length in code points and in UTF-16 code units, so every position stays put."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return text


def carried(old_text: str, findings: Sequence[Finding], new_text: str) -> list[Finding]:
    """``findings`` of ``old_text`` that lie on lines ``new_text`` did not change, moved to
    their new lines (lines before the first changed line stay, lines after the last one
    shift by the number of lines added or removed)."""
    old, new = old_text.split("\n"), new_text.split("\n")
    top = 0
    limit = min(len(old), len(new))
    while top < limit and old[top] == new[top]:
        top += 1
    bottom = 0
    while bottom < limit - top and old[-1 - bottom] == new[-1 - bottom]:
        bottom += 1
    shift = len(new) - len(old)
    kept = []
    for finding in findings:
        end = finding.end_line or finding.line
        if end <= top:
            kept.append(finding)
        elif finding.line > len(old) - bottom:
            kept.append(_moved(finding, shift))
    return kept


def _moved(finding: Finding, shift: int) -> Finding:
    fix = finding.fix
    if fix is not None:
        fix = replace(fix, edits=tuple(replace(e, line=e.line + shift, end_line=e.end_line + shift) for e in fix.edits))
    return replace(finding, line=finding.line + shift, end_line=(finding.end_line + shift) if finding.end_line else 0, fix=fix)


def lint_text(text: str, path: str | None, state: DocumentState, settings: Settings | None = None,
              log: Callable[[str], None] = logger.warning,
              cancelled: Callable[[], bool] | None = None, project=None) -> list[Finding]:
    """Findings of one editor buffer, as ``devlint check`` reports them for that file (its
    settings, ``# noqa``), re-using ``state``'s parse of unchanged statements.

    As ``devlint check``, the rules that pass the text pre-screen are narrowed by the ``ast``
    pre-check (:func:`devlint.precheck.candidates`, on :meth:`StatementCache.precheck_facts`:
    only the changed statements are parsed and walked for it) and a text with no candidate rule is not
    traversed; the pre-check runs while it pays (:attr:`DocumentState.precheck`), the
    findings being the same either way. The collector is off for the whole lint.

    When ``text`` does not parse: the previous good findings on unchanged lines plus one
    ``DEV000`` at the syntax error. Never raises on any text, except :class:`Cancelled` when
    ``cancelled()`` (polled before and after the parse and at every statement of the
    traversal) turns true; ``state`` stays usable then. ``project``, a
    :class:`devlint.project.index.ProjectIndex`, lets the rules read the project files the
    buffer imports, as ``devlint check`` does (:attr:`DocumentState.deps` then lists them)."""
    name = path or "<buffer>"
    select, ignore, dropped = ["DEV"], [], ()
    if path and settings is not None:
        config, error = settings.for_path(path)
        if error:
            log(f"devlint: {error}; using the default settings")
        if excluded(path, config):
            return []
        select, ignore = config.selection(None, (), ())
        dropped = tuple(config.ignored_codes(path))
        torch_settings.set_torch_version(config.torch_version)  # fixes and messages read it
        syntax.set_target_version(config.target_version)  # what is refused (DEV000) reads it
    view = project.view(path) if project is not None and path else None
    state.deps = view.deps if view is not None else {}
    every = enabled_rules(select, ignore)
    chosen = project_rules(view, text, every, state.calls)  # the calls searched again around the edit only
    forced = [r for r in every if r in chosen]
    rules = triggered(text, every)
    if forced:
        rules = [*forced, *(r for r in rules if r not in forced)]
    clean = _clean(text)
    if not rules:
        state.good_text, state.good_findings = clean, []
        return []
    if cancelled is not None and cancelled():
        raise Cancelled()
    if _cli_only(clean, state.budget_counts):  # rare inputs: exactly as devlint check lints them, no cache
        findings = noqa.apply(lint(clean, name, rules=every, project=view), clean)
        if dropped:
            findings = [f for f in findings if not f.code.startswith(dropped)]
        state.good_text, state.good_findings = clean, findings
        return findings

    def narrow(body: str, rules: list) -> list:
        """What the target Python refuses, the ``ast`` pre-check while it pays, then the
        stale-lint watcher."""
        refused = _refused(body, clean, name, state.cache)
        if refused is not None:
            raise _Refused(refused)
        if state.cache.stats.full:
            state.precheck = True  # a new text: see whether the pre-check pays on it
        if state.precheck:
            if cancelled is not None and cancelled():
                raise Cancelled()
            facts = state.cache.precheck_facts()
            if cancelled is not None and cancelled():
                raise Cancelled()
            rules, _ = candidates(body, rules, facts=facts)
            state.precheck = not rules  # it pays while it spares the whole traversal
            if forced:  # the project's summaries may give them findings the pre-check cannot see
                rules = [*forced, *(r for r in rules if r not in forced)]
            if not rules:
                return []
        if cancelled is not None:
            if cancelled():
                raise Cancelled()
            rules = [*rules, _watcher(cancelled)]
        return rules

    try:
        findings, error = lint_parsed_by(clean, name, rules, state.cache.parse, narrow,
                                         state.cache.ast_stand_in, state.positions, view)
    except _Refused as refused:  # as devlint check: that one DEV000 (unless a # noqa silences it)
        findings = noqa.apply([refused.finding], clean, state.noqa_lines.mapping)
        state.broken = [f for f in findings if not (dropped and f.code.startswith(dropped))]
        return state.broken
    if error is not None:  # a syntax error: DEV000, the good findings of unchanged lines kept
        kept = carried(state.good_text, state.good_findings, clean) if state.good_text is not None else []
        state.broken = sorted([*(f for f in kept if f.code != PARSE_ERROR), error])
        return state.broken
    if state.positions:
        alive = {id(statement) for statement in state.cache.module.body}
        for key in [k for k in state.positions if k not in alive and not isinstance(k, str)]:
            del state.positions[key]
    findings = noqa.apply(findings, clean, state.noqa_lines.mapping)
    if dropped:
        findings = [f for f in findings if not f.code.startswith(dropped)]
    state.good_text, state.good_findings = clean, findings
    return findings


def notebook_findings(cells: Sequence[str], path: str | None, state: DocumentState,
                      settings: Settings | None = None, log: Callable[[str], None] = logger.warning,
                      cancelled: Callable[[], bool] | None = None) -> list[list[Finding]]:
    """Findings of each code cell of a notebook (cell-relative lines; a fix whose edits span
    cells is dropped), the cells linted as one program (:meth:`devlint.notebook.Notebook.program`)."""
    text, where = Notebook(tuple(cells)).program()
    per_cell: list[list[Finding]] = [[] for _ in cells]
    if not where:
        return per_cell
    for finding in lint_text(text, path, state, settings, log, cancelled):
        line = min(max(finding.line, 1), len(where))
        cell, row = where[line - 1]
        end_cell, end_row = where[min(max(finding.end_line or line, 1), len(where)) - 1]
        end_column = finding.end_column if end_cell == cell else finding.column
        if end_cell != cell:
            end_row = row
        fix = finding.fix
        if fix is not None:
            edits = []
            for e in fix.edits:
                (a, a_row), (b, b_row) = where[e.line - 1], where[e.end_line - 1]
                if a != cell or b != cell:
                    fix = None
                    break
                edits.append(replace(e, line=a_row, end_line=b_row))
            else:
                fix = replace(fix, edits=tuple(edits))
        per_cell[cell - 1].append(replace(finding, line=row, end_line=end_row, end_column=end_column, fix=fix, cell=cell))
    return per_cell
