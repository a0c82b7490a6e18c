"""The base class of every rule, and of the shared analyses rules read.

A rule is one class in one file of :mod:`devlint.rules`, named after the pattern it flags.
It carries its code, name, message, flagged and clean examples (run as tests; the first of
each becomes the "Example" and "Use instead" sections of its docs) and the prose of its docs.
It inspects the tree through ``visit_<Node>``/``leave_<Node>`` methods, as a libcst visitor
does; the engine calls every rule's methods from one traversal of one parse.
"""

from __future__ import annotations

from typing import Callable, ClassVar, NamedTuple

import libcst as cst

from . import rule_docs


#: Prepended to every example before it runs as a test: examples, like ruff's, omit the imports.
PREAMBLE = "import torch\nimport torch.nn as nn\n"


class NodeFix(NamedTuple):
    """An autofix as a rule states it: replace each node's source by a text. The engine turns
    it into a :class:`devlint.finding.Fix` with positions.

    A replacement may also be a function ``(source, indent) -> text | None`` of the node's
    source text and the indentation of the line it starts on (to insert a statement before
    or after one); ``None`` drops the fix."""

    description: str
    replacements: tuple[tuple[cst.CSTNode, str], ...]
    safe: bool = True


class Site:
    """A node recorded during the traversal with its top-level statement, to report once
    the traversal has moved on (:meth:`devlint.amp.FrameRule.report_at`)."""

    __slots__ = ("node", "top")

    def __init__(self, node: cst.CSTNode, top: int) -> None:
        self.node, self.top = node, top


class Participant:
    """Something with ``visit_<Node>``/``leave_<Node>`` hooks that the engine calls.

    ``ctx`` is the :class:`devlint.context.Context` of the file being linted.
    """

    requires: ClassVar[tuple[type["Analysis"], ...]] = ()
    #: The only names (``Name.value``) whose ``visit_Name`` this participant needs, set by its
    #: ``visit_Module``; ``None``: every name. Where every participant with a ``visit_Name``
    #: sets one, the engine walks no other name (a third of all nodes are names).
    wanted_names: set[str] | None = None
    #: Attributes that only collect facts of the nodes the walk visits (keyed by those nodes or
    #: their ``id``, or a list read when the module is left), never read back while the walk
    #: visits another member of a class: :mod:`devlint.resume_tail` adds what the unchanged
    #: members after an edited one added to them, instead of comparing them.
    walk_logs: ClassVar[tuple[str, ...]] = ()
    #: Attributes always written before they are read (the frame just left): not compared.
    walk_scratch: ClassVar[tuple[str, ...]] = ()

    def __init__(self, ctx) -> None:
        self.ctx = ctx


#: Messages (the code, a space and the text) stay shorter than this many characters.
MESSAGE_WIDTH = 80


class Analysis(Participant):
    """A shared analysis (dataflow, autocast regions...): computed once per file, in the same
    traversal, before any rule's hook for the same node runs. Rules get it with
    ``self.ctx.analysis(TheAnalysis)``."""


class Rule(Participant):
    """One diagnostic code. Subclasses set the class attributes below."""

    code: ClassVar[str]
    name: ClassVar[str]
    #: The finding's text after the code: what is wrong, then the fix in a few words.
    message: ClassVar[str]
    #: Pre-screen: a file is parsed for this rule only if it contains one of these substrings
    #: and, when ``needs_torch``, the word ``torch`` (every import of torch spells it).
    triggers: ClassVar[tuple[str, ...]] = ("torch",)
    needs_torch: ClassVar[bool] = True
    #: The ``ast`` pre-check (:mod:`devlint.precheck`): a function of the file's
    #: :class:`devlint.precheck.Facts` (declare it as a ``staticmethod``) that is False only
    #: where the file holds no node this rule could report, so that libcst is spared the file.
    #: ``None``: every file that passes ``triggers`` is a candidate. Widen it along with the rule.
    candidate: ClassVar[Callable[..., bool] | None] = None
    #: Sources with ``# expect: CODE`` markers on the lines that must be reported; they run
    #: after :data:`PREAMBLE` (``import torch``, ``import torch.nn as nn``).
    flagged: ClassVar[tuple[str, ...]] = ()
    #: Sources that must give no finding of this code.
    clean: ClassVar[tuple[str, ...]] = ()
    what_it_does: ClassVar[str] = ""
    why_bad: ClassVar[str] = ""
    fix_safety: ClassVar[str] = rule_docs.NO_AUTOFIX

    def report(self, node: cst.CSTNode, message: str | None = None, fix: NodeFix | None = None) -> None:
        """Record a finding of this rule at ``node`` (position resolved after the traversal),
        with an optional autofix."""
        self.ctx.report(self, node, message or self.message, fix)

    @classmethod
    def fitted(cls, *variants: str) -> str:
        """The first of ``variants`` (the most specific first) that keeps ``CODE message`` under
        :data:`MESSAGE_WIDTH` characters (the developers' guide: code first, what is wrong,
        the fix in a few words), else the last: a message that names the user's code grows
        with it, so each rule gives shorter spellings to fall back on."""
        room = MESSAGE_WIDTH - len(cls.code) - 1
        return next((v for v in variants if len(v) < room), variants[-1])

    @staticmethod
    def runnable(example: str) -> str:
        """The example as a test runs it: :data:`PREAMBLE` followed by the example."""
        return PREAMBLE + example

    @classmethod
    def summary(cls) -> str:
        """First line of the class docstring."""
        return rule_docs.summary(cls.__doc__, cls.name)

    @classmethod
    def docs(cls) -> str:
        """The rule's docs in ruff's sections, as Markdown."""
        return rule_docs.markdown(cls)
