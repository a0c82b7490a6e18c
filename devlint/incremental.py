"""Re-parse only what changed: a per-document cache of top-level statements for the server.

libcst has no incremental parser, but a module is a sequence of top-level statements whose
libcst nodes are immutable. :class:`StatementCache` keeps the nodes of the last text that
parsed, each with the offset where its text (leading comments and blank lines included)
starts. For a new text it finds the common prefix and suffix with the old one, re-parses only
the statements that the changed span touches (plus one neighbour on each side, so that a
statement that grows into the next one, or a newline deleted between two, is seen), and
rebuilds the :class:`libcst.Module` from the new nodes and the cached ones around them. When
the change lies inside the indented body of one compound statement (a ``class``, ``def``,
``if``, ``for``, ``while``, ``with`` or ``try``; a method of a class, a statement of that
method...), only the touched statements of the innermost such body are parsed, in a stand-in
text that opens the same blocks (:func:`_reparse_inside`), and the compound statements around
them are rebuilt with ``with_changes``: an edit in a 200-line class parses a few lines. The
result equals ``libcst.parse_module(text)`` (node for node; its ``code`` is ``text``);
whenever that cannot be guaranteed (the changed statements do not parse alone, the module's
default newline or indentation would change, a comment could change hands, the lengths do not
add up) the enclosing statement, or the whole text, is parsed.

:meth:`StatementCache.ast_stand_in` gives the first line of every top-level statement in the
form the engine takes as the stdlib ``ast`` of the text (``tree=``), which it only reads for
those lines, so positions are resolved without a second parse of the whole file.
:meth:`StatementCache.stdlib_tree` gives the stdlib ``ast`` of the text for the pre-check
(:mod:`devlint.precheck`), parsing only the top-level statements that are new since the last
call, and :meth:`StatementCache.precheck_facts` its facts, joined from those of each statement.
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass

import libcst as cst

from .inner_positions import lead_lines, lines_of, stub_lines
from .node_memo import NodeMemo
from .precheck import Facts
from .source import line_starts



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
        #: id(top-level libcst statement) -> [that statement, the stdlib ast statements of its
        #: text, their pre-check facts (built when first asked for) or None]
        self._stdlib: dict[int, list] = {}
        #: line counts of statements (``devlint.inner_positions``' memo), kept while their
        #: nodes live: where the statements of a long class start, without parsing it again
        self._lines: dict = {}
        #: id(top-level statement) -> [statement, does the target Python accept its text?]
        #: (:meth:`accepted`), for the target in ``_target``
        self._verdicts: dict[int, list] = {}
        self._target: tuple | None = None
        #: id(statement re-parsed inside) -> (it, the statement it replaced, the stand-in text
        #: that was parsed): accepted when that one was and the stand-in is
        self._derived: dict[int, tuple] = {}

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
        offsets = line_starts(text)
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
        if first == last and isinstance(old.body[first], _OWNERS) and begin == starts[first]:
            inside = _reparse_inside(old.body[first], old_text[begin:end_new - delta], text[begin:end_new],
                                     prefix - begin, changed_end - begin, delta, old, self._lines)
            if inside is not None:
                statement, reparsed, stand_in = inside
                self._derived = {id(statement): (statement, old.body[first], stand_in)}
                line_delta = _line_count(text[begin:end_new]) - _line_count(old_text[begin:end_new - delta])
                self.starts = [*starts[:first + 1], *(s + delta for s in starts[first + 1:])]
                self.lines = [*self.lines[:first + 1], *(n + line_delta for n in self.lines[first + 1:])]
                self.stats = ParseStats(reparsed, False)
                return old.with_changes(body=[*old.body[:first], statement, *old.body[first + 1:]])
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
        offsets = line_starts(piece)
        base = 1 if first == 0 else self.lines[first]
        line_delta = len(offsets) - len(line_starts(old_text[begin:end_new - delta]))
        self.starts = [*starts[:first], *(begin + offsets[n - 1] for n in lines), *(s + delta for s in starts[last + 1:])]
        self.lines = [*self.lines[:first], *(base + n - 1 for n in lines), *(n + line_delta for n in self.lines[last + 1:])]
        self.stats = ParseStats(len(body), False)
        changes = {"body": [*old.body[:first], *body, *old.body[last + 1:]]}
        if first == 0:
            changes["header"] = part.header
        if at_end:
            changes.update(footer=part.footer, has_trailing_newline=part.has_trailing_newline)
        return old.with_changes(**changes)

    # ---- the pre-check's view ------------------------------------------------------------

    def stdlib_tree(self) -> ast.Module | None:
        """The stdlib ``ast.Module`` of the last parsed text, as ``ast.parse`` gives it except
        for positions: each top-level statement is parsed on its own (its text, from the line
        where its leading comments start to the next statement's), and the statements of the
        previous call whose libcst node is unchanged (nodes are immutable, so the same node is
        the same text) are re-used, so an edit parses one statement. Line numbers count from
        the statement's own text, which the pre-check never reads (its predicates look at
        names, calls and literals only).

        Python's grammar parses a top-level statement the same alone as in its file, so the
        tree equals ``ast.parse(text)`` node for node without the positions. ``None`` when a
        statement does not parse (a newer grammar than this Python's: the caller then parses
        the whole text, and fails as ``devlint check`` would) or the statements are not
        mapped (:attr:`starts`)."""
        module, text = self.module, self.text
        if module is None or text is None or len(self.starts) != len(module.body):
            return None
        old, memo, body = self._stdlib, {}, []
        ends = [*self.starts[1:], len(text)]
        for statement, start, end in zip(module.body, self.starts, ends):
            entry = old.get(id(statement))
            if entry is None or entry[0] is not statement:
                try:
                    nodes = ast.parse(text[start:end]).body
                except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
                    self._stdlib = memo
                    return None
                entry = [statement, nodes, None]
            memo[id(statement)] = entry
            body.extend(entry[1])
        self._stdlib = memo
        return ast.Module(body=body, type_ignores=[])

    def precheck_facts(self) -> Facts | None:
        """The pre-check's :class:`devlint.precheck.Facts` of the last parsed text, joined
        (:meth:`Facts.joined`) from the facts of each top-level statement, built once per
        statement node: an edit walks the statements it changed. ``None`` where
        :meth:`stdlib_tree` is ``None`` or the facts cannot be joined."""
        tree = self.stdlib_tree()
        if tree is None:
            return None
        parts = []
        for statement in self.module.body:
            entry = self._stdlib[id(statement)]
            if entry[2] is None:
                entry[2] = Facts(ast.Module(body=entry[1], type_ignores=[]), "")
            parts.append(entry[2])
        return Facts.joined(parts, tree, self.text)

    # ---- what the target Python refuses ------------------------------------------------

    def accepted(self, target: tuple[int, int], accepts) -> bool | None:
        """Does the target Python accept the last parsed text? ``accepts(text)`` is its
        verdict on one text (:func:`devlint.syntax.accepts`), asked for each top-level
        statement whose node is new (its text alone: Python's parser judges a top-level
        statement alone as in its file), the others' verdicts kept. A statement re-parsed
        inside (:func:`_reparse_inside`) whose predecessor was accepted is judged by the
        stand-in text parsed for it (its touched statements inside the same chain of blocks),
        for targets from 3.7 on (before, ``async`` is a keyword only inside ``async def``).
        ``None`` when the statements are not mapped (the caller judges the whole text)."""
        module, text = self.module, self.text
        if module is None or text is None or len(self.starts) != len(module.body):
            return None
        if self._target != target:
            self._verdicts, self._target = {}, target
        old, memo, derived = self._verdicts, {}, self._derived
        ends = [*self.starts[1:], len(text)]
        verdict = True
        for statement, start, end in zip(module.body, self.starts, ends):
            entry = old.get(id(statement))
            if entry is None or entry[0] is not statement:
                made = derived.get(id(statement))
                before = old.get(id(made[1])) if made is not None and made[0] is statement else None
                if before is not None and before[0] is made[1] and before[1] and target >= (3, 7):
                    entry = [statement, accepts(made[2])]
                else:
                    entry = [statement, accepts(text[start:end])]
            memo[id(statement)] = entry
            verdict = verdict and entry[1]
        self._verdicts, self._derived = memo, {}
        return verdict

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


#: Compound statements whose indented ``body`` :func:`_reparse_inside` descends into (not
#: their ``else``, ``except`` or ``finally`` blocks).
_OWNERS = (cst.FunctionDef, cst.ClassDef, cst.If, cst.For, cst.While, cst.With, cst.Try)
#: How many blocks deep it descends (a statement in a method of a class is 2).
_DEPTH = 6


def _inner_starts(statements, tree_body, offsets: list[int]) -> tuple[list[int], list[int]] | None:
    """Offsets (in the text that ``offsets`` index) where the text of each libcst statement of
    a block starts, its leading lines and comments included, and where its first decorator or
    keyword starts, from the block's stdlib ``ast`` statements ``tree_body``; ``None`` when the
    two trees disagree."""
    found, code, k, previous = [], [], 0, -1
    for statement in statements:
        if k >= len(tree_body):
            return None
        node = tree_body[k]
        decorators = getattr(node, "decorator_list", None)
        first = min(d.lineno for d in decorators) if decorators else node.lineno
        line = first - len(statement.leading_lines)
        if decorators:
            line -= len(statement.decorators[0].leading_lines)
        k += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        if line <= previous or not 0 < line <= first <= len(offsets):
            return None
        found.append(offsets[line - 1])
        code.append(offsets[first - 1])
        previous = line
    return (found, code) if k == len(tree_body) else None


def _reparse_inside(statement: cst.BaseStatement, old_piece: str, new_piece: str, begin: int, end: int,
                    delta: int, module: cst.Module, memo: dict | None = None) -> tuple[cst.BaseStatement, int, str] | None:
    """``statement`` (a top-level ``def`` or ``class`` whose text was ``old_piece``) for its new
    text ``new_piece``, which replaced ``old_piece[begin:end]`` (``delta`` characters longer),
    re-parsing only the statements of its innermost indented body (down to :data:`_DEPTH`
    levels: a method's statements) that the change touches, with one neighbour as at the top
    level. Returns (the new statement, how many statements were parsed, the stand-in text
    parsed) or ``None`` (the
    caller then parses the whole statement) when the change touches a header, the last
    statement of a body (whose footer of comments may change hands), or anything that cannot
    be proven to parse as it would in the whole text.

    The touched statements are parsed in a stand-in text that opens the same chain of blocks
    with the same indentation (``if 1:`` headers) and ends with a ``pass`` at their level, as
    the unchanged statement after them does in the whole text: a comment that would move to
    that statement, a block whose indentation differs or a parse error gives ``None``."""
    offsets = line_starts(old_piece)
    by_lines = memo is not None and "\r" not in old_piece
    state = NodeMemo(memo.get("lines") or {}) if by_lines else None
    node_ast, line = None, 1  # the stdlib tree of ``old_piece``'s statement; the line its text starts on
    if not by_lines:
        try:
            tree = ast.parse(old_piece)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if len(tree.body) != 1:
            return None
        node_ast = tree.body[0]
    default = module.default_indent
    node = statement
    chain: list[tuple[cst.CSTNode, int]] = []  # (owner, index of the next owner in its body)
    found = None
    indent, opening = "", ""
    for _ in range(_DEPTH):
        if not isinstance(node, _OWNERS) or not isinstance(node.body, cst.IndentedBlock):
            break
        inner = node.body.body
        if by_lines:
            located = _counted_starts(module, node, line, offsets, state, end)
        else:
            located = _inner_starts(inner, node_ast.body, offsets)
        if located is None:
            break
        starts, code = located[0], located[1]
        a = bisect.bisect_right(starts, begin) - 1
        if a >= 0 and begin <= code[a]:
            a -= 1  # typing in the blank lines above a statement may make them the one above's
        if a < 0:
            break
        b = max(bisect.bisect_right(starts, max(end - 1, begin)) - 1, a)
        if b + 1 < len(inner) and end >= starts[b + 1]:
            b += 1
        level = indent + (node.body.indent if node.body.indent is not None else default)
        header = opening + indent + "if 1:" + module.default_newline
        if b + 1 < len(inner):  # an unchanged statement follows in this body: it can be parsed here
            found = ([*chain, (node, a)], a, b, starts[a], starts[b + 1], level, header)
        if a != b:
            break
        chain.append((node, a))
        opening, indent = header, level
        node = inner[a]
        if by_lines:
            line = located[2][a]
            continue
        node_ast = _ast_of(node_ast.body, inner, a)
        if not isinstance(getattr(node_ast, "body", None), list):
            break
    if state is not None:
        memo["lines"] = state.new
    if found is None:
        return None
    chain, a, b, start, stop, level, opening = found
    newline = module.default_newline
    stand_in = opening + new_piece[start:stop + delta] + level + "pass" + newline
    try:
        part = cst.parse_module(stand_in)
    except Exception:  # noqa: BLE001 - the caller parses the whole statement
        return None
    if part.default_indent != default or part.default_newline != newline or part.header or part.footer:
        return None
    holder = part
    for owner, _ in chain:
        if len(holder.body) != 1 or not isinstance(holder.body[0], cst.If) or holder.body[0].orelse is not None:
            return None
        block = holder.body[0].body
        if not isinstance(block, cst.IndentedBlock) or block.footer or block.indent != owner.body.indent:
            return None
        holder = block
    *statements, last = holder.body
    if (not isinstance(last, cst.SimpleStatementLine) or last.leading_lines or len(last.body) != 1
            or not isinstance(last.body[0], cst.Pass)):
        return None  # a comment of the touched text would belong to the statement after it
    # rebuild the chain from the innermost body outwards
    owner, _ = chain[-1]
    inner = owner.body.body
    replaced = owner.with_changes(body=owner.body.with_changes(body=[*inner[:a], *statements, *inner[b + 1:]]))
    for (outer, index) in reversed(chain[:-1]):
        body = outer.body.body
        replaced = outer.with_changes(body=outer.body.with_changes(body=[*body[:index], replaced, *body[index + 1:]]))
    return replaced, len(statements), stand_in


def _counted_starts(module: cst.Module, owner, line: int, offsets: list[int], state: NodeMemo, end: int):
    """As :func:`_inner_starts` for the statements of ``owner``'s indented body, ``owner``'s text
    (leading lines included) starting on ``line``, found by counting the lines of the statements
    before each (:func:`devlint.inner_positions.lines_of`, kept per node: an edit counts the
    statements it made) instead of parsing the text; also their first lines. Only up to the
    second statement that starts past offset ``end`` (the caller looks no further). ``None``
    when a line falls outside ``offsets``."""
    stub = state.get("stub", owner, lambda: stub_lines(module, owner))
    at = line + stub
    found, code, firsts = [], [], []
    past = 0
    for statement in owner.body.body:
        first = at + lead_lines(statement)
        if not 0 < at <= first <= len(offsets):
            return None
        found.append(offsets[at - 1])
        code.append(offsets[first - 1])
        firsts.append(at)
        if found[-1] > end:
            past += 1
            if past == 2:
                break
        at += lines_of(module, statement, state)
    return found, code, firsts


def _ast_of(tree_body, statements, index: int):
    """The stdlib ``ast`` node of the compound libcst statement ``statements[index]``."""
    k = sum(len(s.body) if isinstance(s, cst.SimpleStatementLine) else 1 for s in statements[:index])
    return tree_body[k] if k < len(tree_body) else None


def _line_count(text: str) -> int:
    """How many lines ``text`` has, newlines as Python's (``len(line_starts(text))``)."""
    return text.count("\n") + 1 if "\r" not in text else len(line_starts(text))


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
