"""Resume a document's walk inside an edited class: the unchanged members before the edit are
not walked again.

The language server lints a document after every keystroke, and a keystroke inside a long
class changes one member of it (a method), the statement cache keeping every other member
node. The one traversal (:func:`devlint.walk.walk`) visits the class's members in order; the
state of every participant (and of the :class:`devlint.context.Context`) when it reaches the
first changed member is the result of walking what came before it. :class:`ClassResume` keeps
that state, copied when the walk reached the member (:class:`Snapshot`), and on a later lint
puts a copy of it back in place of walking the unchanged members again, when it can prove that
the walk would rebuild the same state:

* the same participants (rule classes, in order), torch and target-Python settings, no
  project view (whose other files may change without this text changing);
* the same top-level statements before the class and the same members before the resumed one
  (the very node objects: nodes are immutable), the class's header unchanged;
* the state when the walk enters the class body the same as it was then, compared in full
  (:func:`devlint.walk_state.fingerprint`), the module, the class and its body standing for their new nodes: what
  a participant gathered from the whole module or class up front (the imports of the file, the
  methods' names, the text's flags) is in that state, so an edit that changes it walks the
  class again;
* every member a participant looked up through the class node while walking those members
  (:meth:`devlint.context.Context.note_read`) the same node now.

The state is copied (:func:`devlint.walk_state.copy_state`) with the nodes kept (immutable) and the module, the
class and its body (and their ``id``s, which participants use as keys) swapped for the new
ones. Anything the copy cannot handle (a type it does not know) ends the attempt: the walk then
goes through the whole class, as it always may. The findings are the walk's, whichever way.
"""

from __future__ import annotations

import libcst as cst

from .resume_tail import TailResume
from .walk_state import (CTX_SKIPPED, Unsupported, copy_all, deps_current, fingerprint, logs_of, owner_vars, plain,
                         project_deps, thaw)

#: the key of a document's :class:`ClassResume` in the memo the caller keeps between lints
RESUME = "devlint.resume"
class Snapshot:
    """The walk's state when it reached member ``j`` of the class at top-level index ``index``
    (see the module docstring): ``state`` holds one copied attribute dict per owner (the
    context, then each participant), ``owners`` the objects it was taken from."""

    __slots__ = ("key", "index", "before", "module", "node", "members", "entry", "state", "owners", "deps", "plains")

    def __init__(self, key, index, before, module, node, members, entry, state, owners, deps, plains) -> None:
        self.key, self.index, self.before, self.module, self.node = key, index, before, module, node
        self.members, self.entry, self.state, self.owners = members, entry, state, owners
        #: the other project files the covered walk read, with their hashes (None: no project view)
        self.deps = deps
        #: per owner, the logs of atoms, nodes and tuples (:func:`devlint.walk_state.plain`), kept
        #: apart from ``state``: put back with :func:`devlint.walk_state.thaw`
        self.plains = plains


def _header_same(a: cst.ClassDef, b: cst.ClassDef) -> bool:
    return (a.name is b.name and _same_items(a.decorators, b.decorators) and _same_items(a.bases, b.bases)
            and _same_items(a.keywords, b.keywords) and a.body.__class__ is b.body.__class__ is cst.IndentedBlock)


def _same_items(a, b) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class ClassResume:
    """Per document, between lints: the last module walked and the :class:`Snapshot` kept.
    :meth:`hooks` plans one walk (``None``: walk everything); the walk calls the returned
    hooks when it pops the named members. Not thread safe: one document, one lint at a time."""

    def __init__(self) -> None:
        self.module: cst.Module | None = None
        self.snapshot: Snapshot | None = None
        self._entry: list | None = None
        #: the members after the edited one (:mod:`devlint.resume_tail`)
        self.tail = TailResume()

    def hooks(self, module: cst.Module, ctx, participants: list, key) -> dict | None:
        """``{id(member): hook(stack) -> bool}`` for :func:`devlint.walk.walk`, or ``None``."""
        previous, self.module, self._entry = self.module, module, None
        if previous is None or len(previous.body) != len(module.body):
            return None
        changed = [k for k, (a, b) in enumerate(zip(previous.body, module.body)) if a is not b]
        if len(changed) != 1:
            return None
        index = changed[0]
        node, old = module.body[index], previous.body[index]
        if node.__class__ is not cst.ClassDef or old.__class__ is not cst.ClassDef or not _header_same(node, old):
            return None
        members, old_members = node.body.body, old.body.body
        first = next((k for k, (a, b) in enumerate(zip(members, old_members)) if a is not b), None)
        if first is None:
            return None
        owners = [ctx, *(p for p in participants if not getattr(p, "stateless", False))]
        polls = [p.poll for p in participants if getattr(p, "stateless", False) and hasattr(p, "poll")]
        marks: list = []  # the guard marks when the walk entered the class body (its own set on its members)
        at: dict = {}
        if len(members) == len(old_members):
            self.tail.hooks(at, module, node, first, ctx, owners, key, lambda: marks[0] if marks else None, polls)
        if first == 0:
            if at:
                at[id(members[0])] = lambda stack: marks.append(frozenset(ctx._guard_nodes)) and False
            return at or None
        snapshot = self.snapshot
        usable = (snapshot is not None and snapshot.key == key and snapshot.index == index
                  and _same_items(module.body[:index], snapshot.before) and _header_same(node, snapshot.node)
                  and len(members) > len(snapshot.members) and _same_items(members[:len(snapshot.members)], snapshot.members))
        if not usable:
            self.snapshot = snapshot = None
        tokens = {id(module): "M", id(node): "C", id(node.body): "B"}
        skip = {id(ctx): CTX_SKIPPED}
        restored: list = []

        def enter(stack: list) -> bool:
            """At the class's first member: compare the state, and resume after the members
            the snapshot covers when it is the same."""
            marks.append(frozenset(ctx._guard_nodes))
            for poll in polls:  # a stale lint (the language server's) stops before the copy
                poll()
            try:
                self._entry = fingerprint(owners, tokens, skip)
            except Unsupported:
                return False
            if (snapshot is None or self._entry != snapshot.entry or not self._reads_same(snapshot, members)
                    or not deps_current(snapshot.deps, ctx.project)):
                return False
            count = len(snapshot.members)
            if len(stack) < count - 1 or any(stack[-k][0] is not members[k] or stack[-k][1] != 0 for k in range(1, count)):
                return False
            self._restore(snapshot, owners, module, node)  # copies what was copied once: no Unsupported
            if ctx.project is not None:  # the files the covered walk read stay the lint's dependencies
                ctx.project.deps.update(snapshot.deps)
            del stack[len(stack) - (count - 1):]
            restored.append(count)
            return True

        def record(stack: list) -> bool:
            """At the first changed member: keep the state (when the entry was compared)."""
            if self._entry is None or restored == [first]:
                return False  # not compared, or resumed right here: the snapshot stays
            avoid = {id(module), id(node), id(node.body), *map(id, owners)}  # ids a copy maps to the new ones
            try:
                memo = {id(o): o for o in owners}
                parts, plains = [], []
                for o in owners:
                    values = owner_vars(o, CTX_SKIPPED if o is ctx else frozenset())
                    # logs of atoms, nodes and tuples (most of the state's bulk): copied plainly
                    kept = {n: thaw(values.pop(n)) for n in logs_of(o, ctx)[0] if n in values and plain(values[n], avoid)}
                    parts.append(values)
                    plains.append(kept)
                state = copy_all(parts, memo, {})
            except Unsupported:
                return False
            self.snapshot = Snapshot(key, index, tuple(module.body[:index]), module, node, tuple(members[:first]),
                                     self._entry, state, owners, project_deps(ctx.project), plains)
            return False

        at.update({id(members[0]): enter, id(members[first]): record})
        return at

    @staticmethod
    def _reads_same(snapshot: Snapshot, members) -> bool:
        """Is every member the covered walk read through the class node the same node now?"""
        reads = snapshot.state[0].get("reads") or snapshot.plains[0].get("reads", ())
        if not reads:
            return True
        if any(r is None for r in reads):
            return False
        old = {id(m) for m in snapshot.node.body.body}
        now = {id(m) for m in members}
        return all(id(r) not in old or id(r) in now for r in reads)

    def _restore(self, snapshot: Snapshot, owners: list, module: cst.Module, node: cst.ClassDef) -> None:
        old, old_module = snapshot.node, snapshot.module
        swapped = {id(old): node, id(old.body): node.body, id(old_module): module}
        ints = {id(old): id(node), id(old.body): id(node.body), id(old_module): id(module)}
        memo = {id(o): n for o, n in zip(snapshot.owners, owners)}
        ints.update((id(o), id(n)) for o, n in zip(snapshot.owners, owners))
        memo.update(swapped)
        # the walk holds the context's set of guarded node ids itself: refill that very set
        ctx, marks = owners[0], owners[0]._guard_nodes
        kept = snapshot.state[0].get("_guard_nodes")
        if kept is None:
            kept = snapshot.plains[0]["_guard_nodes"]
        marks.clear()
        memo[id(kept)] = marks
        for owner, state, plains in zip(owners, copy_all(snapshot.state, memo, ints), snapshot.plains):
            for name, value in state.items():
                setattr(owner, name, value)
            for name, value in plains.items():
                if value is not kept:
                    setattr(owner, name, thaw(value))
        marks.update(ints.get(n, n) for n in kept)
        assert ctx._guard_nodes is marks
