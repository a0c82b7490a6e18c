"""Where the nodes of one statement lie: libcst's own code generation, recorded leanly.

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

from libcst.metadata import CodePosition, CodeRange
from libcst._nodes.internal import CodegenState

#: (start line, start column, end line, end column), 1-based lines, 0-based columns.
Span = tuple[int, int, int, int]


class _Recorder(CodegenState):
    """A code generation state that keeps no text, only the position and each node's span."""

    __slots__ = ("line", "column", "starts", "spans")

    def __init__(self, indent: str, newline: str) -> None:
        super().__init__(default_indent=indent, default_newline=newline)
        self.line, self.column = 1, 0
        self.starts: list[tuple[int, int]] = []
        self.spans: dict = {}

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
        if node not in self.spans:  # a syntactic span recorded inside wins (as in libcst)
            self.spans[node] = (line, column, self.line, self.column)

    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> "_Syntactic":
        return _Syntactic(self, node, start_node, end_node)


class _Syntactic:
    """The ``with`` block libcst opens around a node's own tokens."""

    __slots__ = ("state", "node", "start_node", "end_node", "line", "column")

    def __init__(self, state: _Recorder, node, start_node, end_node) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.line, self.column = self.state.line, self.state.column

    def __exit__(self, *exc) -> None:
        state = self.state
        spans = state.spans
        start = spans[self.start_node][:2] if self.start_node is not None else (self.line, self.column)
        end = spans[self.end_node][2:] if self.end_node is not None else (state.line, state.column)
        spans[self.node] = (*start, *end)


def statement_ranges(statement, indent: str, newline: str) -> dict:
    """``node -> span`` (:data:`Span`) of every node of ``statement`` generated alone, its
    first line (its leading blank and comment lines included) line 1. ``indent`` and
    ``newline`` are the module's defaults. Raises what libcst's code generation raises."""
    state = _Recorder(indent, newline)
    statement._codegen(state)
    return state.spans


def as_range(span: Span, shift: int = 0) -> CodeRange:
    """A :data:`Span` moved down ``shift`` lines, as libcst's ``CodeRange``."""
    return CodeRange(CodePosition(span[0] + shift, span[1]), CodePosition(span[2] + shift, span[3]))
