"""Where reported nodes lie: line and column ranges, found one top-level statement at a time.

:func:`reported_ranges` renders only the top-level statements that hold a reported node, each
alone, and shifts it by the statement's first line (from the stdlib ``ast``,
:mod:`devlint.parsing`); the whole module is rendered only where that fails.

Rendering one statement is libcst's own code generation, recorded leanly. Before that, a
statement whose reported nodes are all plain names, each spelled once in the statement's lines,
is not rendered at all: each name lies where its text does (:class:`_TextSearch`; a 30k-line
file of 15k ``x = y.cuda()`` findings: 0.6 -> 0.17 s).

libcst's ``PositionProvider`` goes through ``MetadataWrapper``, which first walks the whole
tree once with no visitor, and a state that runs a regular expression over every token and
builds two dataclass objects per node: 0.3 ms for a one-line statement, the whole cost of a
file whose every line holds a finding (issue 24: 100k such lines). :func:`statement_ranges`
runs the statement's own ``_codegen`` with a state that only counts lines and columns and
keeps each node's range as a tuple, recorded as ``PositionProvider`` records it (a node's
syntactic range, or one hoisted from the child nodes it names); the numbers are the same
(``tests/test_positions.py`` compares them on every fixture). The cost per statement is its
size, never the file's.
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider
from libcst._nodes.internal import CodegenState

from . import parsing
from . import walk
from .inner_positions import place_inside

#: (start line, start column, end line, end column), 1-based lines, 0-based columns.
Span = tuple[int, int, int, int]


class _Recorder(CodegenState):
    """A code generation state that keeps no text, only the position and each node's span,
    keyed by the node's ``id`` (libcst's ``__hash__`` is a Python call per lookup). It is its
    own context manager for the syntactic positions libcst records: ``with
    state.record_syntactic_position(node)`` stores the arguments, ``__enter__`` pushes them
    with the position, ``__exit__`` pops them (no object per node)."""

    __slots__ = ("line", "column", "starts", "spans", "_pending", "_open")

    def __init__(self, indent: str, newline: str) -> None:
        super().__init__(default_indent=indent, default_newline=newline)
        self.line, self.column = 1, 0
        self.starts: list[tuple[int, int]] = []
        self.spans: dict[int, Span] = {}
        self._pending: tuple = ()
        self._open: list[tuple] = []

    def add_token(self, value: str) -> None:
        if "\n" in value or "\r" in value:
            value = value.replace("\r\n", "\n").replace("\r", "\n")
            self.line += value.count("\n")
            self.column = len(value) - value.rfind("\n") - 1
        else:
            self.column += len(value)

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def before_codegen(self, node) -> None:
        self.starts.append((self.line, self.column))

    def after_codegen(self, node) -> None:
        line, column = self.starts.pop()
        key = id(node)
        if key not in self.spans:  # a syntactic span recorded inside wins (as in libcst)
            self.spans[key] = (line, column, self.line, self.column)

    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> "_Recorder":
        self._pending = (node, start_node, end_node)
        return self

    def __enter__(self) -> None:
        self._open.append((*self._pending, self.line, self.column))

    def __exit__(self, *exc) -> None:
        node, start_node, end_node, line, column = self._open.pop()
        spans = self.spans
        start = spans[id(start_node)][:2] if start_node is not None else (line, column)
        end = spans[id(end_node)][2:] if end_node is not None else (self.line, self.column)
        spans[id(node)] = (*start, *end)


def statement_ranges(statement, indent: str, newline: str) -> dict[int, Span]:
    """``id(node) -> span`` (:data:`Span`) of every node of ``statement`` generated alone, its
    first line (its leading blank and comment lines included) line 1. ``indent`` and
    ``newline`` are the module's defaults; the ids are valid while ``statement`` lives.
    Raises what libcst's code generation raises."""
    state = _Recorder(indent, newline)
    statement._codegen(state)
    return state.spans


def as_range(span: Span, shift: int = 0) -> CodeRange:
    """A :data:`Span` moved down ``shift`` lines, as libcst's ``CodeRange``."""
    return CodeRange(CodePosition(span[0] + shift, span[1]), CodePosition(span[2] + shift, span[3]))


def reported_ranges(module: cst.Module, text: str, wanted: dict[int, list], tree: ast.Module | None,
                    memo: dict | None = None):
    """Node -> CodeRange for the reported nodes only.

    ``wanted`` maps a top-level statement index to the nodes reported in it. Each such
    statement is rendered alone with libcst's ``PositionProvider`` and shifted by its first
    line, taken from the stdlib ``ast`` (about 10x cheaper to parse than libcst); without a
    usable ``ast`` the whole module is rendered. ``tree`` may also be the list of first lines of
    the ``ast``'s top-level statements (:func:`devlint.parsing.top_starts`), or a :class:`devlint.parsing.PieceStarts`. ``memo`` (``id(statement)`` ->
    the statement, the module's indent and newline, its rendered positions) keeps the rendering
    of each statement for the next call: the positions inside a statement rendered alone depend
    only on that (immutable) node and on the module's default indent and newline."""
    if tree is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            tree = None
    if isinstance(tree, parsing.PieceStarts):
        pieces = tree
        starts: dict[int, int] = {}
        for index in wanted:
            start = pieces.start(module, index)
            if start is None:
                return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
            starts[index] = start
    else:
        tops = tree if isinstance(tree, list) else parsing.top_starts(tree) if tree is not None else None
        starts = parsing.statement_starts(module.body, tops) if tops is not None else None  # type: ignore[assignment]
        if not starts:
            return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        pieces = None
    found: dict = {}
    missing: list = []
    deep = memo is not None and pieces is None and "\r" not in text
    by_text = _TextSearch(text, module, starts if pieces is None else pieces) if "\r" not in text else None
    for index, nodes in wanted.items():
        if deep and place_inside(module, index, starts[index], nodes, found, memo, walk.children):
            continue
        if by_text is not None and by_text.place(index, starts[index], nodes, found):
            continue
        _place(module, index, starts[index], nodes, found, missing, memo)
    if missing:  # reported with another statement's index (a fix that edits an import too)
        located = _locate(module, {id(node) for node in missing})
        regrouped: dict[int, list] = {}
        for node in missing:
            index = located.get(id(node))
            if index is None:
                return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
            regrouped.setdefault(index, []).append(node)
        lost: list = []
        for index, nodes in regrouped.items():
            start = starts[index] if pieces is None else pieces.start(module, index)
            if start is None:
                return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
            _place(module, index, start, nodes, found, lost, memo)
        if lost:  # pragma: no cover - _locate found them there
            return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return found


def _place(module: cst.Module, index: int, start: int, nodes: list, found: dict, missing: list,
           memo: dict | None = None) -> None:
    """Positions of ``nodes`` found in top-level statement ``index`` (first line ``start``),
    rendered alone (or taken from ``memo``, see :func:`reported_ranges`), into ``found``; the nodes it
    does not hold are appended to ``missing``."""
    statement = module.body[index]
    style = (module.default_indent, module.default_newline)
    kept = memo.get(id(statement)) if memo is not None else None
    if kept is not None and kept[0] is statement and kept[1] == style:
        where = kept[2]
    else:
        where = statement_ranges(statement, *style)
        if memo is not None:
            memo[id(statement)] = (statement, style, where)
    decorators = getattr(statement, "decorators", None)
    shift = start - where[id(decorators[0] if decorators else statement)][0]
    for node in nodes:
        span = where.get(id(node))
        if span is None:
            missing.append(node)
            continue
        found[node] = as_range(span, shift)


#: The most characters of text :class:`_TextSearch` scans for one statement's names.
_SEARCHED = 400


class _TextSearch:
    """Positions of unparenthesized ``Name`` nodes from the text alone, with no rendering.

    A ``Name``'s range is its value (libcst records nothing else for it). The text from a
    top-level statement's anchor line to the line before the next statement's anchor holds
    the whole statement (no two top-level statements share a line) and maybe comments; where
    each reported name's value occurs exactly once in that text, that occurrence is the node.
    The nodes must be below the statement (checked by a walk of its children, which stops
    once all are seen; a node reported with another statement's index goes to the
    renderer). Only for a text without ``\\r`` (lines end at ``\\n``) and statements of at
    most :data:`_SEARCHED` characters, so the work per finding is bounded."""

    def __init__(self, text: str, module: cst.Module, starts) -> None:
        self.text, self.module, self.starts = text, module, starts
        self.offsets: list[int] | None = None

    def _line_offset(self, line: int) -> int:
        """Offset in the text of the start of 1-based ``line`` (past the last line: the text's length)."""
        if self.offsets is None:
            self.offsets = _newline_offsets(self.text)
        return self.offsets[line - 1] if line <= len(self.offsets) else len(self.text)

    def _next_start(self, index: int) -> int | None:
        """The anchor line of the statement after ``module.body[index]`` (past the last line for the last)."""
        if index + 1 >= len(self.module.body):
            self._line_offset(1)
            return len(self.offsets) + 1
        starts = self.starts
        return starts[index + 1] if isinstance(starts, list) else starts.start(self.module, index + 1)

    def place(self, index: int, start: int, nodes: list, found: dict) -> bool:
        """Put the ranges of ``nodes`` (reported in ``module.body[index]``, anchored on line
        ``start``) in ``found`` and return True; False, placing nothing, when one is no plain
        ``Name`` of this statement or its value is not unique in the statement's text."""
        name = cst.Name
        for node in nodes:
            if node.__class__ is not name or node.lpar:
                return False
        after = self._next_start(index)
        if after is None or after <= start:
            return False
        begin, end = self._line_offset(start), self._line_offset(after)
        if end - begin > _SEARCHED:
            return False
        text = self.text
        placed = []
        for node in nodes:
            value = node.value
            at = text.find(value, begin, end)
            if at < 0 or text.find(value, at + 1, end) >= 0:
                return False
            placed.append(at)
        if not _holds(self.module.body[index], nodes):
            return False
        for node, at in zip(nodes, placed):
            line_begin = text.rfind("\n", begin, at) + 1 or begin
            line = start + text.count("\n", begin, at)
            column = at - line_begin
            found[node] = CodeRange(CodePosition(line, column), CodePosition(line, column + len(node.value)))
        return True


def _newline_offsets(text: str) -> list[int]:
    """Offset of the first character of each line of a text whose lines end at ``\\n``."""
    offsets = [0]
    at = text.find("\n")
    while at >= 0:
        offsets.append(at + 1)
        at = text.find("\n", at + 1)
    return offsets


def _holds(statement, nodes: list) -> bool:
    """Are all ``nodes`` below ``statement``, as the walk enters it (decorators included, see
    :func:`devlint.walk.children`, inlined here: no generator per node)?"""
    left = {id(node) for node in nodes}
    stack = [statement]
    pop, push = stack.pop, stack.append
    fields, named, walked, walkable = walk._FIELDS, walk._fields, walk._WALKED, walk._walkable
    while stack:
        node = pop()
        if id(node) in left:
            left.discard(id(node))
            if not left:
                return True
        kind = node.__class__
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            stack.extend(node.decorators)
        for name in fields.get(kind) or named(kind):
            value = getattr(node, name)
            cls = value.__class__
            if cls is tuple or cls is list:
                for item in value:
                    ok = walked.get(item.__class__)
                    if ok or (ok is None and walkable(item.__class__)):
                        push(item)
            else:
                ok = walked.get(cls)
                if ok or (ok is None and walkable(cls)):
                    push(value)
    return False


def _locate(module: cst.Module, ids: set[int]) -> dict[int, int]:
    """``id(node) -> index of the top-level statement holding it`` for the nodes whose ids
    are given, found by a walk of the children (no code generation), which stops once all are
    found."""
    left, located = set(ids), {}
    for index, statement in enumerate(module.body):
        stack = [statement]
        while stack:
            node = stack.pop()
            if id(node) in left:
                located[id(node)] = index
                left.discard(id(node))
                if not left:
                    return located
            stack.extend(walk.children(node))
    return located
