"""Re-parse only what changed: a per-document cache of top-level statements for the server.

libcst has no incremental parser, but a module is a sequence of top-level statements whose
libcst nodes are immutable. :class:`StatementCache` keeps the nodes of the last text that
parsed, each with the offset where its text (leading comments and blank lines included)
starts. For a new text it finds the common prefix and suffix with the old one, re-parses only
the statements that the changed span touches (plus one neighbour on each side, so that a
statement that grows into the next one, or a newline deleted between two, is seen), and
rebuilds the :class:`libcst.Module` from the new nodes and the cached ones around them. The
result equals ``libcst.parse_module(text)`` as source (its ``code`` is ``text``); whenever
that cannot be guaranteed (the changed statements do not parse alone, the module's default
newline or indentation would change, the lengths do not add up) the whole text is parsed.

:meth:`StatementCache.ast_stand_in` gives the first line of every top-level statement in the
form the engine takes as the stdlib ``ast`` of the text (``tree=``), which it only reads for
those lines, so positions are resolved without a second parse of the whole file.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass

import libcst as cst

_NEWLINE = re.compile(r"\r\n|\r|\n")


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (binary search on slices)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the longest common suffix of ``a`` and ``b``, at most ``limit``."""
    low, high = 0, min(len(a), len(b), limit)
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid:len(a) - low] == b[len(b) - mid:len(b) - low]:
            low = mid
        else:
            high = mid - 1
    return low


def _length(module: cst.Module, nodes) -> int:
    return sum(len(module.code_for_node(node)) for node in nodes)


@dataclass
class ParseStats:
    """What the last :meth:`StatementCache.parse` did: ``reparsed`` top-level statements
    parsed anew (all of them after a full parse), ``full`` whether the whole text was parsed."""

    reparsed: int = 0
    full: bool = True


class StatementCache:
    """The parsed top-level statements of one document's last good text.

    ``parse(text)`` returns the module of ``text`` (raising :class:`libcst.ParserSyntaxError`
    as ``libcst.parse_module`` does, the cache then keeping the last good text). Not thread
    safe: one document, one linting thread."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.module: cst.Module | None = None
        self.starts: list[int] = []  # offset where statement k's text starts
        self.lines: list[int] = []  # 1-based line where statement k's text starts
        self.stats = ParseStats()

    # ---- parsing -------------------------------------------------------------------------

    def parse(self, text: str) -> cst.Module:
        """The libcst module of ``text``, re-using the nodes of unchanged statements."""
        if self.module is not None and text == self.text:
            self.stats = ParseStats(0, False)
            return self.module
        module = self._incremental(text) if self.module is not None and self.starts else None
        if module is None:
            module = cst.parse_module(text)
            self._index(module, text)
            self.stats = ParseStats(len(module.body), True)
        self.text, self.module = text, module
        return module

    def _index(self, module: cst.Module, text: str) -> None:
        """Offsets and lines of every statement of a fully parsed module."""
        lines = _first_lines(module, text)
        if lines is None:
            self.starts, self.lines = [], []  # cannot map the text: full parses only
            return
        offsets = _line_offsets(text)
        self.starts, self.lines = [offsets[n - 1] for n in lines], lines

    def _incremental(self, text: str) -> cst.Module | None:
        old_text, old, starts = self.text, self.module, self.starts
        assert old_text is not None and old is not None
        count = len(starts)
        prefix = common_prefix(old_text, text)
        suffix = common_suffix(old_text, text, min(len(old_text), len(text)) - prefix)
        delta = len(text) - len(old_text)
        changed_end = len(old_text) - suffix  # the change replaced old_text[prefix:changed_end]
        # the statements the change touches; the one before too when the change reaches into
        # the blank lines and comments above a statement (it may belong to the one before),
        # the one after too when it reaches the newline that ends a statement
        first = bisect.bisect_right(starts, prefix) - 1
        if first >= 0 and prefix <= starts[first] + _length(old, old.body[first].leading_lines):
            first -= 1
        first = max(first, 0)
        last = max(bisect.bisect_right(starts, max(changed_end - 1, prefix)) - 1, first)
        if last + 1 < count and changed_end >= starts[last + 1]:
            last += 1
        begin = 0 if first == 0 else starts[first]
        at_end = last == count - 1
        end_new = (len(old_text) if at_end else starts[last + 1]) + delta
        if end_new < begin or end_new < prefix:
            return None
        piece = text[begin:end_new]
        try:
            part = cst.parse_module(piece)
        except Exception:  # noqa: BLE001 - a full parse decides (and reports) what is wrong
            return None
        if (not part.body or part.default_newline != old.default_newline
                or (part.default_indent != old.default_indent and _has_block(part))
                or (not at_end and (part.footer or not part.has_trailing_newline))):
            return None
        body = list(part.body)
        if first > 0 and part.header:
            body[0] = body[0].with_changes(leading_lines=[*part.header, *body[0].leading_lines])
            part = part.with_changes(header=(), body=body)
        lines = _first_lines(part, piece)
        if lines is None or (first > 0 and lines[0] != 1):
            return None
        offsets = _line_offsets(piece)
        base = 1 if first == 0 else self.lines[first]
        line_delta = len(offsets) - len(_line_offsets(old_text[begin:end_new - delta]))
        self.starts = [*starts[:first], *(begin + offsets[n - 1] for n in lines), *(s + delta for s in starts[last + 1:])]
        self.lines = [*self.lines[:first], *(base + n - 1 for n in lines), *(n + line_delta for n in self.lines[last + 1:])]
        self.stats = ParseStats(len(body), False)
        changes = {"body": [*old.body[:first], *body, *old.body[last + 1:]]}
        if first == 0:
            changes["header"] = part.header
        if at_end:
            changes.update(footer=part.footer, has_trailing_newline=part.has_trailing_newline)
        return old.with_changes(**changes)

    # ---- the engine's view ---------------------------------------------------------------

    def ast_stand_in(self) -> ast.Module | None:
        """An ``ast.Module`` whose ``body`` holds one node per stdlib statement of the last
        parsed text, with the right ``lineno`` (and ``decorator_list`` lines): what
        :func:`devlint.engine.lint_module` reads from ``tree`` to place findings. ``None``
        when the lines are not known (the engine then parses the text itself)."""
        if self.module is None or len(self.lines) != len(self.module.body):
            return None
        nodes: list[ast.stmt] = []
        for statement, line in zip(self.module.body, self.lines):
            line += len(statement.leading_lines)
            if isinstance(statement, cst.SimpleStatementLine):
                nodes.extend(ast.Pass(lineno=line, col_offset=0) for _ in statement.body)
                continue
            node = ast.Pass(lineno=line, col_offset=0)
            decorators = getattr(statement, "decorators", ())
            if decorators:
                at = line + len(decorators[0].leading_lines)
                node.decorator_list = [ast.Name(id="_", lineno=at, col_offset=0)]
            nodes.append(node)
        return ast.Module(body=nodes, type_ignores=[])


def _line_offsets(text: str) -> list[int]:
    """Offset where each line starts (line ``n`` at index ``n - 1``), newlines as Python's."""
    return [0, *(m.end() for m in _NEWLINE.finditer(text))]


def _first_lines(module: cst.Module, text: str) -> list[int] | None:
    """1-based line where the text of each top-level statement of ``module`` (parsed from
    ``text``) starts, its leading blank lines and comments included, from the stdlib ``ast``
    (CPython's parser, far cheaper than rendering the libcst nodes). ``None`` when the two
    parsers disagree (or ``ast`` fails: a newer grammar than this Python's)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines, k, previous = [], 0, 0
    for statement in module.body:
        if k >= len(tree.body):
            return None
        node = tree.body[k]
        decorators = getattr(node, "decorator_list", None)
        line = min(d.lineno for d in decorators) if decorators else node.lineno
        line -= len(statement.leading_lines)
        if decorators:
            line -= len(statement.decorators[0].leading_lines)
        k += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        if line <= previous:
            return None
        lines.append(line)
        previous = line
    return lines if k == len(tree.body) else None


def _has_block(module: cst.Module) -> bool:
    """Does any top-level statement hold an indented block (whose indent defaults to the
    module's)?"""
    return any(not isinstance(s, cst.SimpleStatementLine) for s in module.body)
