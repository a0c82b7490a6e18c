"""Results computed from an immutable libcst node, kept from one lint of a document to the next.

The language server lints the same document again after each edit; the nodes an edit did not
touch are the same objects. :class:`NodeMemo` finds a result by ``(kind, id(node))`` among
those of the previous lint, checks that the node is the very one it was made from (an ``id``
may be reused once a node is freed), and keeps for the next lint only what this one asked for.
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")


class NodeMemo:
    """``old``: the previous lint's entries (``(kind, id(node)) -> (node, result)``); ``new``:
    this lint's, to hand to the next one."""

    def __init__(self, old: dict) -> None:
        self.old, self.new = old, {}

    def get(self, kind: str, node, make: Callable[[], T]) -> T:
        """The result ``make()`` of ``node``, computed again only for a node not seen before."""
        key = (kind, id(node))
        entry = self.new.get(key) or self.old.get(key)
        if entry is None or entry[0] is not node:
            entry = (node, make())
        self.new[key] = entry
        return entry[1]

    def peek(self, kind: str, node):
        """The result kept for ``node`` (carried to the next lint), or ``None`` if none was."""
        key = (kind, id(node))
        entry = self.new.get(key) or self.old.get(key)
        if entry is None or entry[0] is not node:
            return None
        self.new[key] = entry
        return entry[1]
