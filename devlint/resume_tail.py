"""Resume a document's walk after the edited member of a class: the unchanged members after
it are not walked again.

:mod:`devlint.resume` puts back the state the walk had when it reached the edited member of a
long class; this module does the same for the members after it. When the walk has gone
through the edited member, the participants' state is compared with the state the last lint
had at that point (:func:`devlint.walk_state.fingerprint`, the module, the class and its body
standing for their new nodes) and, when it is the same, the state the last lint had after the
class's last member is put back instead of walking the members between:

* every member but the edited one the very node it was then (nodes are immutable), the class
  header unchanged, the same participants and settings (the caller's key);
* the attributes a participant declares as logs (:attr:`devlint.rule.Participant.walk_logs`:
  facts keyed by the nodes visited, or read only when the module is left, never read back
  while the walk visits another member) and the context's reports, guarded-node marks and
  reads are not compared: they hold the edited member's own nodes. What the members after it
  added to them (the last lint checks that it only added: a value that changed or went away
  keeps nothing) is added to them now, in place;
* scratch attributes (:attr:`devlint.rule.Participant.walk_scratch`, always written before
  they are read) are not compared and are put back as they were after the last member;
* the guard marks the class body set on its members when the walk entered it
  (:meth:`devlint.guard_tracking.GuardTracker.visit_IndentedBlock`) the same, the edited
  member aside;
* nothing the members after the edited one read through the class node
  (:meth:`devlint.context.Context.note_read`) is the edited member, nor the whole text.

Anything the copy or the comparison cannot handle walks the members, as the walk always may.
"""

from __future__ import annotations

from .walk_state import CTX_LOGS, CTX_SKIPPED, Unsupported, copy_all, deps_current, fingerprint, logs_of, owner_vars, plain, project_deps, thaw

def _shape(value):
    """What a log held when the walk left the edited member: enough to tell, after the last
    member, what the members between added (``None``: not there yet)."""
    cls = value.__class__
    if cls is list:
        return ("list", value, len(value), value[-1] if value else None)
    if cls is set:
        return ("set", value, frozenset(value))
    if cls is dict:
        inner = {k: len(v) for k, v in value.items() if v.__class__ in (list, dict, set)}
        return ("dict", value, dict(value), inner)
    raise Unsupported(cls.__name__)


def _added(shape, value):
    """What ``value`` (a log after the last member) holds beyond ``shape``: ``("list", items)``,
    ``("set", items)`` or ``("dict", {new key: item}, {key: what its list or dict gained})``.
    Raises :class:`Unsupported` when the log did more than add."""
    cls = value.__class__
    if shape is None:
        shape = ("list", value, 0, None) if cls is list else ("set", value, frozenset()) if cls is set else (
            "dict", value, {}, {}) if cls is dict else None
        if shape is None:
            raise Unsupported(cls.__name__)
    kind, before = shape[0], shape[1]
    if value is not before:
        raise Unsupported("a log replaced")
    if kind == "list":
        count, last = shape[2], shape[3]
        if len(value) < count or (count and value[count - 1] is not last):
            raise Unsupported("a list log shrank")
        return ("list", value[count:])
    if kind == "set":
        kept = shape[2]
        if not kept <= value:
            raise Unsupported("a set log lost items")
        return ("set", [v for v in value if v not in kept])
    items, inner = shape[2], shape[3]
    new, grown = {}, {}
    for key, item in value.items():
        if key not in items:
            new[key] = item
            continue
        if item is not items[key]:
            raise Unsupported("a dict log changed a value")
        count = inner.get(key)
        if count is not None and len(item) != count:
            if len(item) < count or item.__class__ is set:
                raise Unsupported("a dict log's value shrank, or its set grew")
            grown[key] = item[count:] if item.__class__ is list else dict(list(item.items())[count:])
    if len(items) > len(value) or any(k not in value for k in items):
        raise Unsupported("a dict log lost a key")
    return ("dict", new, grown)


def _merge(target, added) -> None:
    """Add ``added`` (of :func:`_added`, copied) to the log ``target``, in place."""
    kind = added[0]
    if kind == "list":
        target.extend(added[1])
    elif kind == "set":
        target.update(added[1])
    else:
        for key, item in added[1].items():
            present = target.get(key)
            if present is not None and present.__class__ is item.__class__ and item.__class__ in (list, dict, set):
                (present.extend if item.__class__ is list else present.update)(item)
            else:
                target[key] = item
        for key, gained in added[2].items():
            present = target.get(key)
            if present is None:
                target[key] = gained
            elif present.__class__ is list:
                present.extend(gained)
            else:
                present.update(gained)


def _empty_like(added):
    kind = added[0]
    return [] if kind == "list" else set() if kind == "set" else {}


class TailSnapshot:
    """What the last lint recorded of the walk of one class's members after member ``first``:
    the state's fingerprint when the walk left that member (``entry``), the guard marks the
    class body set (``marks``), the reads the later members made, and ``state``: per owner,
    the compared and scratch attributes after the last member, and what the logs gained."""

    __slots__ = ("key", "first", "module", "node", "members", "entry", "marks", "reads", "state", "owners", "deps")

    def __init__(self, key, first, module, node, members, entry, marks, reads, state, owners, deps) -> None:
        self.key, self.first, self.module, self.node, self.members = key, first, module, node, members
        self.entry, self.marks, self.reads, self.state, self.owners = entry, marks, reads, state, owners
        #: the other project files the walk had read after the last member (None: no project view)
        self.deps = deps


class TailResume:
    """Per document, between lints: the :class:`TailSnapshot` kept. :meth:`hooks` adds the
    walk hooks of one lint (see :func:`devlint.walk.walk`'s ``at``)."""

    def __init__(self) -> None:
        self.snapshot: TailSnapshot | None = None

    def hooks(self, at: dict, module, node, first: int, ctx, owners: list, key, class_marks, polls=()) -> None:
        """Add to ``at`` the hook run when the walk leaves member ``first`` of the class
        ``node`` (top-level statement of ``module``); ``class_marks()`` gives the guard marks
        the class body set on its members (taken when the walk entered it), or ``None``;
        each of ``polls`` is called first (it raises to end a stale lint)."""
        members = node.body.body
        count = len(members)
        if first + 1 >= count:
            return
        snapshot = self.snapshot
        if snapshot is not None and not (
                snapshot.key == key and snapshot.first == first and len(snapshot.members) == count
                and all(a is b for k, (a, b) in enumerate(zip(members, snapshot.members)) if k != first)):
            snapshot = None
        tokens = {id(module): "M", id(node): "C", id(node.body): "B"}
        skip = {id(ctx): CTX_SKIPPED | frozenset(CTX_LOGS)}
        for owner in owners[1:]:
            logs, scratch = logs_of(owner, ctx)
            if logs or scratch:
                skip[id(owner)] = frozenset((*logs, *scratch))
        later = members[first + 1:]

        def leave(stack: list) -> bool:
            """At member ``first + 1``: resume after the last member when the state is the
            same as the last lint's here; else record it."""
            if len(stack) < len(later) - 1 or any(
                    stack[-k][0] is not later[k] or stack[-k][1] != 0 for k in range(1, len(later))):
                return False
            for poll in polls:
                poll()
            marks = class_marks()
            if marks is not None:
                marks = marks - {id(members[first])}
            try:
                entry = fingerprint(owners, tokens, skip)
            except Unsupported:
                return False
            if (snapshot is not None and marks is not None and marks == snapshot.marks and entry == snapshot.entry
                    and not any(r is None or r is snapshot.members[first] for r in snapshot.reads)
                    and deps_current(snapshot.deps, ctx.project)):
                try:
                    self._restore(snapshot, owners, ctx, module, node)
                except Unsupported:
                    return False
                if ctx.project is not None:  # the files the skipped members read stay the lint's dependencies
                    ctx.project.deps.update(snapshot.deps)
                del stack[len(stack) - (len(later) - 1):]
                return True
            if marks is None:
                return False
            try:
                shapes = [{name: (_shape(getattr(o, name)) if hasattr(o, name) else None) for name in logs_of(o, ctx)[0]}
                          for o in owners]
            except Unsupported:
                return False
            reads_at = len(ctx.reads)
            sentinel = _Sentinel()
            at[id(sentinel)] = lambda _stack: self._record(key, first, module, node, entry, marks, reads_at, shapes,
                                                           owners, ctx) or True
            stack.insert(len(stack) - (len(later) - 1), (sentinel, 0))
            return False

        at[id(later[0])] = leave

    def _record(self, key, first, module, node, entry, marks, reads_at, shapes, owners, ctx) -> None:
        """After the last member (the sentinel's turn): keep what the members walked since
        member ``first`` left behind."""
        avoid = {id(module), id(node), id(node.body), *map(id, owners)}  # ids a copy maps to the new ones
        try:
            parts = []
            for owner, shape in zip(owners, shapes):
                logs, scratch = logs_of(owner, ctx)
                kept = {name: value for name, value in owner_vars(owner, CTX_SKIPPED if owner is ctx else frozenset()).items()
                        if name not in logs}
                gained = {name: _added(shape[name], getattr(owner, name)) for name in logs if hasattr(owner, name)}
                frozen = {name: added for name, added in gained.items() if all(plain(a, avoid) for a in added[1:])}
                parts.append((kept, {n: a for n, a in gained.items() if n not in frozen}, frozen))
            memo = {id(o): o for o in owners}
            state = copy_all(parts, memo, {})
        except Unsupported:
            return
        self.snapshot = TailSnapshot(key, first, module, node, tuple(node.body.body), entry, marks,
                                     tuple(ctx.reads[reads_at:]), state, owners, project_deps(ctx.project))

    @staticmethod
    def _restore(snapshot: TailSnapshot, owners: list, ctx, module, node) -> None:
        old, old_module = snapshot.node, snapshot.module
        memo = {id(old): node, id(old.body): node.body, id(old_module): module}
        ints = {id(old): id(node), id(old.body): id(node.body), id(old_module): id(module)}
        memo.update((id(o), n) for o, n in zip(snapshot.owners, owners))
        ints.update((id(o), id(n)) for o, n in zip(snapshot.owners, owners))
        parts = copy_all([part[:2] for part in snapshot.state], memo, ints)
        for owner, (kept, gained), part in zip(owners, parts, snapshot.state):
            gained.update((name, (added[0], *map(thaw, added[1:]))) for name, added in part[2].items())  # no object in them
            for name, value in kept.items():
                setattr(owner, name, value)
            for name, added in gained.items():
                target = getattr(owner, name, None)
                if target is None:
                    target = _empty_like(added)
                    setattr(owner, name, target)
                _merge(target, added)


class _Sentinel:
    """A stack entry the walk hands to its hook after the class's last member."""

    __slots__ = ()
