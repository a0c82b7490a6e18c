"""The per-file state of one lint: the scopes entered, the imports, the availability guards
seen so far and the reports filed, shared by the engine's walk, the analyses and the rules."""

from __future__ import annotations

import libcst as cst

from .names import ImportTable
from .node_memo import NodeMemo
from .rule import Analysis, Rule


class Scope:
    """A module, class or function body: ``kind`` is ``"module"``, ``"class"`` or
    ``"function"``; ``node`` its libcst node; ``parent`` the enclosing scope."""

    __slots__ = ("kind", "node", "parent", "name")

    def __init__(self, kind: str, node: cst.CSTNode, parent: "Scope | None", name: str) -> None:
        self.kind, self.node, self.parent, self.name = kind, node, parent, name


class Context:
    """Per-file state shared by the engine, the analyses and the rules.

    ``names`` resolves dotted torch names; ``guarded`` tells whether the node being visited
    sits under an availability guard (:mod:`devlint.guards`); ``scope`` is the innermost
    module/class/function; ``text`` is the source.
    """

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text
        self.names = ImportTable()
        self.guard_names: set[str] = set()
        self.negative_guard_names: set[str] = set()
        #: last components of option names whose default is an availability test
        #: (``parser.add_argument("--cuda", default=torch.cuda.is_available())``)
        self.guard_attrs: set[str] = set()
        #: module-level functions that always end in an exit (``pytest.skip(msg)``, ``raise``)
        self.exit_functions: set[str] = set()
        #: module-level functions that return None first thing without an accelerator
        #: (``if not torch.cuda.is_available(): return None``): a result not None means one is in use
        self.none_without_accelerator: set[str] = set()
        self.scope: Scope | None = None
        self.guard_depth = 0
        self._guard_nodes: set[int] = set()
        self._analyses: dict[type, Analysis] = {}
        self.reports: list[tuple[Rule, cst.CSTNode, str, object, int]] = []
        self.statement_index = 0  # index in Module.body of the statement being visited
        #: this file's :class:`devlint.project.index.View` of the project (``None``: alone)
        self.project = None
        #: results kept from the previous lint of the same document (:meth:`remembered`)
        self._kept: NodeMemo | None = None
        #: what the walk read beyond the node it visits (:meth:`note_read`)
        self.reads: list[cst.CSTNode | None] = []

    def keep_between_lints(self, memo: dict | None) -> None:
        """Let :meth:`remembered` keep its results in ``memo``, a dict the caller keeps for
        one document between lints (the language server's; ``None``: nothing kept)."""
        self._kept = None if memo is None else NodeMemo(memo.get("remembered") or {})

    def done_with_lint(self, memo: dict | None) -> None:
        """Keep for the next lint only the results this one asked for (nodes since replaced
        are dropped with them)."""
        if memo is not None and self._kept is not None:
            memo["remembered"] = self._kept.new

    def remembered(self, kind: str, node: cst.CSTNode, make):
        """``make()``, a pure function of the immutable ``node``, computed once per node while
        the caller keeps the document's memo (:meth:`keep_between_lints`): an edit inside a
        long class computes it again only for the nodes the edit made. Without a memo, just
        ``make()``."""
        return make() if self._kept is None else self._kept.get(kind, node, make)

    def note_read(self, node: cst.CSTNode | None) -> None:
        """A participant read ``node`` (a member of a class, found through the class node)
        while visiting another node, or the whole text (``None``): :mod:`devlint.resume`
        resumes a walk after unchanged members only where what they read is unchanged too."""
        self.reads.append(node)

    @property
    def guarded(self) -> bool:
        """True while visiting code that only runs where an accelerator exists."""
        return self.guard_depth > 0

    def resolve(self, node: cst.CSTNode | None) -> str | None:
        """Dotted name through the imports (``T.cuda.Event`` -> ``torch.cuda.Event``)."""
        return self.names.resolve(node)

    def guard(self, node: cst.CSTNode | None) -> None:
        """Mark ``node`` (a block, statement or expression) as guarded."""
        if node is not None:
            self._guard_nodes.add(id(node))

    def analysis(self, kind: type[Analysis]) -> Analysis:
        """The shared analysis instance of this file."""
        return self._analyses[kind]

    def report(self, rule: Rule, node: cst.CSTNode, message: str, fix=None) -> None:
        self.reports.append((rule, node, message, fix, self.statement_index))
