"""Resolve local names to dotted torch names through the module's own imports.

A light import-alias table instead of libcst's QualifiedNameProvider (which costs several
parses): ``import torch as T`` makes ``T.cuda.synchronize`` resolve to
``torch.cuda.synchronize``; ``from torch.cuda.amp import GradScaler`` makes ``GradScaler``
resolve to ``torch.cuda.amp.GradScaler``. A name that was never imported resolves to ``None``,
so a local function that happens to be called ``autocast`` is not torch's.
"""

from __future__ import annotations

import libcst as cst


_Attribute, _Name = cst.Attribute, cst.Name


def dotted(node: cst.CSTNode | None) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else ``None``.

    Exact-type tests (libcst's node classes are never subclassed): ``isinstance`` against
    them goes through the ABC machinery, a measurable share of a lint run."""
    if node.__class__ is _Name:
        return node.value
    parts = []
    while node.__class__ is _Attribute:
        parts.append(node.attr.value)
        node = node.value
    if node.__class__ is _Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


class ImportTable:
    """Map of local name -> dotted module path, filled from ``import`` statements."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.relative: set[str] = set()  # names bound by ``from .x import name`` (not resolved)
        #: name -> (dots, module, imported name) of a relative import, for the project index
        self.relative_from: dict[str, tuple[int, str, str]] = {}

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        """Record the names an import statement binds."""
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted(alias.name)
                if full is None:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.aliases[alias.asname.name.value] = full
                else:
                    top = full.split(".", 1)[0]
                    self.aliases[top] = top
            return
        if node.relative and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(bound, cst.Name):
                    self.relative.add(bound.value)
                    original = dotted(alias.name)
                    if original is not None:
                        self.relative_from[bound.value] = (len(node.relative), dotted(node.module) or "", original)
        if node.relative or isinstance(node.names, cst.ImportStar):
            return
        module = dotted(node.module)
        if module is None:
            return
        for alias in node.names:
            name = dotted(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{module}.{name}"

    def forget(self, name: str) -> None:
        """A module-level ``def``/``class`` of that name shadows the import."""
        self.aliases.pop(name, None)
        self.relative.discard(name)
        self.relative_from.pop(name, None)

    def resolve(self, node: cst.CSTNode | None) -> str | None:
        """Dotted name of ``node`` through the imports, e.g. ``torch.cuda.amp.GradScaler``.

        The chain's head is looked up before any string is built: most names of a file are
        not imported, and this runs on many nodes."""
        if node.__class__ is _Name:
            return self.aliases.get(node.value)
        parts = []
        while node.__class__ is _Attribute:
            parts.append(node.attr.value)
            node = node.value
        if node.__class__ is not _Name:
            return None
        full = self.aliases.get(node.value)
        if full is None:
            return None
        parts.append(full)
        return ".".join(reversed(parts))
