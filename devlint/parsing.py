"""libcst's parse of a text: whole, or a long file in pieces joined into one Module.

:func:`parse_module` is libcst's parse without its per-node validation. A long file is cut
between top-level statements (:func:`cuts_by_tree`, from its stdlib tree, or
:func:`cuts_by_text`, from its lines alone), each piece parsed alone and the pieces' statements
joined (:func:`join_pieces`); :class:`PieceStarts`, :func:`top_starts` and
:func:`statement_starts` give the first line of each top-level statement, which the positions
of findings are counted from."""

from __future__ import annotations

import ast
import bisect

import libcst as cst
from libcst._nodes.base import CSTNode


#: Files longer than this many lines are parsed by libcst in pieces of about this size, cut
#: between top-level statements and joined into one Module. On one long text libcst's parser
#: costs more per line and holds far more memory: 60k lines of diffusers took 116 µs/line and
#: 680 MB at once, 65 µs/line and 250 MB in pieces of 2,000 lines.
CHUNK_LINES = 2_000


def parse_by_text(text: str) -> "tuple[cst.Module, PieceStarts | list[int] | None]":
    """A long text without a stdlib tree, parsed in pieces cut by :func:`cuts_by_text` (no
    ``ast.parse`` of the whole text: at 10k lines and more that was a tenth of a lint); the
    first lines of its statements come from the ``ast`` of only the pieces that hold a finding
    (:class:`PieceStarts`). When a piece does not parse (a cut the text misjudged, or a syntax
    error) the text is cut by its stdlib tree as before, or parsed whole if that fails too.
    Returns the module and what :func:`devlint.positions.reported_ranges` takes as ``tree``; raises what
    ``libcst.parse_module(text)`` raises."""
    lines = text.split("\n")
    cuts = cuts_by_text(lines, CHUNK_LINES)
    if cuts is not None:
        pieces = parse_pieces(lines, cuts)
        if pieces is not None:
            module = join_pieces(pieces, text)
            if module is not None:
                return module, PieceStarts(lines, cuts, [len(m.body) for m in pieces])
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return parse_module(text), None
    cuts = cuts_by_tree(tree)
    starts = top_starts(tree)
    del tree
    return parse_in_pieces(text, cuts), starts


#: Lines that may open a top-level statement a text cut goes before (see :func:`cuts_by_text`).
_CUT_OPENERS = ("def ", "class ", "async def ", "@")


def cuts_by_text(lines: list[str], size: int) -> list[int] | None:
    """Line counts at which to cut ``lines`` into pieces of at least ``size`` lines, found in
    the text alone: before a line at column 0 that opens a ``def``, ``class`` or decorator (and
    the blank and comment lines above it, which :func:`cuts_by_tree` also leaves to the next piece),
    unless the code line above is a decorator or a closing bracket. ``None`` if no cut.

    The text can misjudge (such a line inside a triple-quoted string, a bracket or a
    multi-line decorator): the piece before that cut then ends inside the string, the bracket
    or the decorated definition, which libcst rejects, and :func:`parse_by_text` falls back. A
    piece that parses ends where the tokenizer is at the start of a line outside any string
    or bracket and the statement is complete, so the next one begins a top-level statement."""
    cuts, n, i = [0], len(lines), size
    while i < n:
        if lines[i].startswith(_CUT_OPENERS):
            j = i
            while j > cuts[-1] and (not lines[j - 1].strip() or lines[j - 1].lstrip().startswith("#")):
                j -= 1
            if j - cuts[-1] >= size and not lines[j - 1].startswith(("@", ")", "]", "}")):
                cuts.append(j)
                i = j + size
                continue
        i += 1
    return cuts if len(cuts) > 1 else None


class PieceStarts:
    """First line (decorators included) of each top-level statement of a module joined from
    pieces (:func:`parse_by_text`), from the stdlib ``ast`` of a piece, parsed the first time
    one of its statements is asked for. ``lines`` are the text's lines, ``cuts`` the pieces'
    first lines (0-based), ``counts`` how many statements each piece's module holds."""

    def __init__(self, lines: list[str], cuts: list[int], counts: list[int]) -> None:
        self.lines, self.cuts = lines, cuts
        self.firsts = [0]  # index in Module.body of each piece's first statement
        for count in counts:
            self.firsts.append(self.firsts[-1] + count)
        self._starts: dict[int, list[int] | None] = {}

    def start(self, module: cst.Module, index: int) -> int | None:
        """1-based first line of ``module.body[index]``; ``None`` where the piece's ``ast``
        does not match its libcst statements (the caller then renders the whole module)."""
        piece = bisect.bisect_right(self.firsts, index) - 1
        if piece not in self._starts:
            self._starts[piece] = self._piece_starts(module, piece)
        starts = self._starts[piece]
        return None if starts is None else starts[index - self.firsts[piece]]

    def _piece_starts(self, module: cst.Module, piece: int) -> list[int] | None:
        bounds = [*self.cuts, len(self.lines)]
        a, b = bounds[piece], bounds[piece + 1]
        try:
            tree = ast.parse("\n".join(self.lines[a:b]))
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return None
        return statement_starts(module.body[self.firsts[piece]:self.firsts[piece + 1]], [a + s for s in top_starts(tree)])


def statement_starts(statements, tops: list[int]) -> list[int] | None:
    """First line of each libcst statement from the first lines of the ``ast``'s top-level
    statements (``a = 1; b = 2`` is one libcst line and two ``ast`` statements); ``None`` if
    they do not pair up."""
    starts: list[int] = []
    k = 0
    for statement in statements:
        if k >= len(tops):
            return None
        starts.append(tops[k])
        k += len(statement.body) if statement.__class__ is cst.SimpleStatementLine else 1
    return starts if k == len(tops) else None


def top_starts(tree: ast.Module) -> list[int]:
    """First line (decorators included) of each top-level statement of a stdlib tree."""
    starts = []
    for node in tree.body:
        decorators = getattr(node, "decorator_list", None)
        starts.append(min(d.lineno for d in decorators) if decorators else node.lineno)
    return starts


def cuts_by_tree(tree: ast.Module, size: int | None = None) -> list[int] | None:
    """Line counts at which to cut the text into pieces of about ``size`` lines, each ending
    with a top-level statement (no statement shares a line with the next); ``None`` if one
    piece it is."""
    size = CHUNK_LINES if size is None else size
    cuts, last_end = [0], 0
    for node, start in zip(tree.body, top_starts(tree)):
        if start > last_end and last_end - cuts[-1] >= size:
            cuts.append(last_end)
        last_end = max(last_end, node.end_lineno or node.lineno)
    return cuts if len(cuts) > 1 else None


_VALIDATE = CSTNode.__post_init__


def _unvalidated(self) -> None:
    """Stands for ``CSTNode.__post_init__`` while the parser builds a tree (see :func:`parse_module`)."""


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module(text)`` without libcst's per-node validation.

    Every node libcst builds runs ``_validate`` (its ``__post_init__``), about a sixth of the
    parse: checks that a node made by hand is well formed, which the parser's own nodes are
    by construction (libcst's source says as much). It is switched off for the parse only and
    always restored to libcst's own method, so a concurrent parse can at worst validate.
    Raises what ``libcst.parse_module`` raises."""
    CSTNode.__post_init__ = _unvalidated
    try:
        return cst.parse_module(text)
    finally:
        CSTNode.__post_init__ = _VALIDATE


def parse_in_pieces(text: str, cuts: list[int] | None) -> cst.Module:
    """``libcst.parse_module(text)`` (without validation, see :func:`parse_module`), in pieces cut at ``cuts`` (see :data:`CHUNK_LINES`).

    The pieces' statements are joined into one Module whose code is ``text`` (:func:`join_pieces`).
    Where the pieces disagree on the default indentation (a block's indent is stored relative
    to it) or a piece fails, the text is parsed whole, which also reports any syntax error as
    before."""
    if not cuts:
        return parse_module(text)
    pieces = parse_pieces(text.split("\n"), cuts)
    module = join_pieces(pieces, text) if pieces is not None else None
    return parse_module(text) if module is None else module


def parse_pieces(lines: list[str], cuts: list[int]) -> list[cst.Module] | None:
    """Each piece ``lines[cut:next cut]`` parsed alone (the last one without a newline added);
    ``None`` as soon as one fails."""
    bounds = [*cuts, len(lines)]
    modules = []
    try:
        for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
            last = i == len(bounds) - 2
            modules.append(parse_module("\n".join(lines[a:b]) + ("" if last else "\n")))
    except Exception:  # noqa: BLE001 - the caller parses otherwise, which gives the error
        return None
    return modules


def join_pieces(modules: list[cst.Module], text: str) -> cst.Module | None:
    """The pieces' statements as one Module whose code is ``text``: a piece's header (and the
    previous piece's footer) go before its first statement. ``None`` where the pieces disagree
    on the default indentation or newline, or hold no statement."""
    first = modules[0]
    if any(m.default_indent != first.default_indent or m.default_newline != first.default_newline for m in modules):
        return None
    body, carried = [], []
    for i, m in enumerate(modules):
        statements = list(m.body)
        if i:
            carried += m.header  # the first piece's header stays the Module's
        if statements and carried:
            statements[0] = statements[0].with_changes(leading_lines=[*carried, *statements[0].leading_lines])
            carried = []
        body += statements
        carried += m.footer
    if not body:
        return None
    return first.with_changes(body=body, footer=carried, has_trailing_newline=modules[-1].has_trailing_newline)
