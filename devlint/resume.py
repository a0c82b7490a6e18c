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
  (:func:`fingerprint`), the module, the class and its body standing for their new nodes: what
  a participant gathered from the whole module or class up front (the imports of the file, the
  methods' names, the text's flags) is in that state, so an edit that changes it walks the
  class again;
* every member a participant looked up through the class node while walking those members
  (:meth:`devlint.context.Context.note_read`) the same node now.

The state is copied (:func:`copy_state`) with the nodes kept (immutable) and the module, the
class and its body (and their ``id``s, which participants use as keys) swapped for the new
ones. Anything the copy cannot handle (a type it does not know) ends the attempt: the walk then
goes through the whole class, as it always may. The findings are the walk's, whichever way.
"""

from __future__ import annotations

import re
import types

import libcst as cst

#: the key of a document's :class:`ClassResume` in the memo the caller keeps between lints
RESUME = "devlint.resume"
#: values copied and compared as they are
_ATOMS = frozenset({int, float, complex, str, bytes, bool, type(None), type, range, re.Pattern,
                    types.BuiltinFunctionType, types.FunctionType})
#: context attributes that are not walk state (the text, the cross-lint memo, the project view)
_CTX_SKIPPED = frozenset({"text", "path", "_kept", "project"})


class Unsupported(Exception):
    """The state holds a value :func:`copy_state` or :func:`fingerprint` does not know."""


def _slots(cls: type) -> tuple[str, ...]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend((slots,) if isinstance(slots, str) else slots)
    return tuple(n for n in names if n not in ("__dict__", "__weakref__"))


_SLOTS: dict[type, tuple[str, ...]] = {}


def _fields(obj) -> list[tuple[str, object]]:
    cls = obj.__class__
    slots = _SLOTS.get(cls)
    if slots is None:
        slots = _SLOTS[cls] = _slots(cls)
    found = [(name, getattr(obj, name)) for name in slots if hasattr(obj, name)]
    found.extend(getattr(obj, "__dict__", {}).items())
    return found


def _is_node(value) -> bool:
    return isinstance(value, cst.CSTNode)


def fingerprint(roots: list, tokens: dict[int, str], skip: dict[int, frozenset]) -> list:
    """A flat list that equals another's exactly when the two states are the same: every
    container and object under ``roots`` in traversal order, nodes and ints by identity and
    value, the nodes (and ints equal to the ids) in ``tokens`` by their token, an object seen
    before by its first position. ``skip`` names attributes left out per object id.

    Raises :class:`Unsupported` for a value of a type it does not know."""
    out: list = []
    seen: dict[int, int] = {}
    numbers: list[int] = []  # where ints were written: an int that is the id of an object of the state is that object
    add = out.append
    stack = list(reversed(roots))
    while stack:
        value = stack.pop()
        cls = value.__class__
        if cls is int:
            if value in tokens:
                add(tokens[value])
            else:
                numbers.append(len(out))
                add(value)
            continue
        if cls in _ATOMS:
            add(value if cls is not types.FunctionType else ("f", id(value)))
            continue
        key = id(value)
        if key in tokens:
            add(tokens[key])
            continue
        if key in seen:
            add(("r", seen[key]))
            continue
        if _is_node(value):
            if cls is cst.Module and not value.body and not value.header and not value.footer:
                # a printer (``cst.Module([]).code_for_node``) a participant makes for itself
                add(("printer", value.default_indent, value.default_newline, value.has_trailing_newline, value.encoding))
            else:
                add(("n", key))
            continue
        seen[key] = len(seen)
        if cls is dict:
            add(("d", len(value)))
            for k, v in reversed(list(value.items())):
                stack.append(v)
                stack.append(k)
        elif (cls is set or cls is frozenset) and all(v.__class__ is str for v in value):
            add((cls.__name__, tuple(sorted(value))))  # the same strings, whatever their order
        elif (cls is set or cls is frozenset) and all(v.__class__ is int and v not in tokens for v in value):
            add((cls.__name__, tuple(sorted(value))))  # the same numbers (node ids), whatever their order
        elif cls is list or cls is tuple or cls is set or cls is frozenset:
            add((cls.__name__, len(value)))
            stack.extend(reversed(list(value)))
        elif isinstance(value, tuple) and hasattr(cls, "_fields"):
            add((cls.__name__, len(value)))
            stack.extend(reversed(list(value)))
        elif cls is types.MethodType:
            add(("m", id(value.__func__)))
            stack.append(value.__self__)
        elif hasattr(value, "__dict__") or _slots(cls):
            left = skip.get(key, frozenset())
            fields = [(n, v) for n, v in _fields(value) if n not in left]
            add(("o", cls, tuple(n for n, _ in fields)))
            stack.extend(v for _, v in reversed(fields))
        else:
            raise Unsupported(cls.__name__)
    for at in numbers:  # a key made of an object's id (``d[id(chain)] = chain``) is that object
        number = out[at]
        if number in seen:
            out[at] = ("i", seen[number])
    return out


def _reachable(values, memo: dict[int, object]) -> dict[int, object]:
    """id -> object of every container and object under ``values`` that :func:`copy_state`
    copies (not in ``memo``, no node, no atom)."""
    found: dict[int, object] = {}
    stack = list(values)
    while stack:
        value = stack.pop()
        cls = value.__class__
        if cls in _ATOMS or _is_node(value):
            continue
        key = id(value)
        if key in found or key in memo:
            continue
        found[key] = value
        if cls is dict:
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack.extend(value)
        elif cls is types.MethodType:
            stack.append(value.__self__)
        elif hasattr(value, "__dict__") or _slots(cls):
            stack.extend(v for _, v in _fields(value))
    return found


def copy_all(values: list, memo: dict[int, object], ints: dict[int, int]) -> list:
    """:func:`copy_state` of each of ``values``, one copy: shared objects stay shared, and an
    int that is the ``id`` of an object copied becomes the ``id`` of its copy (a key made of an
    object's id keeps naming it)."""
    ids = _reachable(values, memo)
    ints = dict(ints)

    class Ints(dict):
        def __missing__(self, number):
            target = ids.get(number)
            if target is None:
                return number
            made = copy_state(target, memo, self)
            self[number] = id(made)
            return id(made)

    table = Ints(ints)
    return [copy_state(v, memo, table) for v in values]


def copy_state(value, memo: dict[int, object], ints: dict[int, int]):
    """A copy of ``value`` whose mutable containers and objects are new, nodes and atoms kept,
    ``memo`` (id -> object) giving what an object becomes (pre-seeded with the participants,
    the context and the swapped nodes) and ``ints`` what an int becomes (the swapped nodes'
    ids). Shared objects stay shared. Raises :class:`Unsupported` for an unknown type."""
    cls = value.__class__
    if cls is int:
        return ints[value] if value in ints or ints.__class__ is not dict else value
    if cls in _ATOMS:
        return value
    key = id(value)
    found = memo.get(key)
    if found is not None:
        return found
    if _is_node(value):
        return value
    if cls is dict:
        new: dict = {}
        memo[key] = new
        for k, v in value.items():
            new[copy_state(k, memo, ints)] = copy_state(v, memo, ints)
        return new
    if cls is list:
        new_list: list = []
        memo[key] = new_list
        new_list.extend(copy_state(v, memo, ints) for v in value)
        return new_list
    if cls is set:
        items = [copy_state(v, memo, ints) for v in value]
        # a copy of the same elements keeps the table (and so the order a loop over it sees)
        new_set = value.copy() if all(a is b for a, b in zip(items, value)) else set(items)
        memo[key] = new_set
        return new_set
    if cls is tuple or cls is frozenset or (isinstance(value, tuple) and hasattr(cls, "_fields")):
        items = [copy_state(v, memo, ints) for v in value]
        if all(a is b for a, b in zip(items, value)):
            result = value
        elif cls is tuple or cls is frozenset:
            result = cls(items)
        else:
            result = cls(*items)
        memo[key] = result
        return result
    if cls is types.MethodType:
        result = types.MethodType(value.__func__, copy_state(value.__self__, memo, ints))
        memo[key] = result
        return result
    if hasattr(value, "__dict__") or _slots(cls):
        new_obj = cls.__new__(cls)
        memo[key] = new_obj
        for name, v in _fields(value):
            object.__setattr__(new_obj, name, copy_state(v, memo, ints))
        return new_obj
    raise Unsupported(cls.__name__)


class Snapshot:
    """The walk's state when it reached member ``j`` of the class at top-level index ``index``
    (see the module docstring): ``state`` holds one copied attribute dict per owner (the
    context, then each participant), ``owners`` the objects it was taken from."""

    __slots__ = ("key", "index", "before", "module", "node", "members", "entry", "state", "owners")

    def __init__(self, key, index, before, module, node, members, entry, state, owners) -> None:
        self.key, self.index, self.before, self.module, self.node = key, index, before, module, node
        self.members, self.entry, self.state, self.owners = members, entry, state, owners


def _header_same(a: cst.ClassDef, b: cst.ClassDef) -> bool:
    return (a.name is b.name and _same_items(a.decorators, b.decorators) and _same_items(a.bases, b.bases)
            and _same_items(a.keywords, b.keywords) and a.body.__class__ is b.body.__class__ is cst.IndentedBlock)


def _same_items(a, b) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _vars(owner, skipped: frozenset) -> dict:
    return {name: value for name, value in vars(owner).items() if name not in skipped}


class ClassResume:
    """Per document, between lints: the last module walked and the :class:`Snapshot` kept.
    :meth:`hooks` plans one walk (``None``: walk everything); the walk calls the returned
    hooks when it pops the named members. Not thread safe: one document, one lint at a time."""

    def __init__(self) -> None:
        self.module: cst.Module | None = None
        self.snapshot: Snapshot | None = None
        self._entry: list | None = None

    def hooks(self, module: cst.Module, ctx, participants: list, key) -> dict | None:
        """``{id(member): hook(stack) -> bool}`` for :func:`devlint.walk.walk`, or ``None``."""
        previous, self.module, self._entry = self.module, module, None
        if previous is None or ctx.project is not None or len(previous.body) != len(module.body):
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
        if first is None or first == 0:
            return None
        owners = [ctx, *(p for p in participants if not getattr(p, "stateless", False))]
        snapshot = self.snapshot
        usable = (snapshot is not None and snapshot.key == key and snapshot.index == index
                  and _same_items(module.body[:index], snapshot.before) and _header_same(node, snapshot.node)
                  and len(members) > len(snapshot.members) and _same_items(members[:len(snapshot.members)], snapshot.members))
        if not usable:
            self.snapshot = snapshot = None
        tokens = {id(module): "M", id(node): "C", id(node.body): "B"}
        skip = {id(ctx): _CTX_SKIPPED}
        restored: list = []

        def enter(stack: list) -> bool:
            """At the class's first member: compare the state, and resume after the members
            the snapshot covers when it is the same."""
            try:
                self._entry = fingerprint(owners, tokens, skip)
            except Unsupported:
                return False
            if snapshot is None or self._entry != snapshot.entry or not self._reads_same(snapshot, members):
                return False
            count = len(snapshot.members)
            if len(stack) < count - 1 or any(stack[-k][0] is not members[k] or stack[-k][1] != 0 for k in range(1, count)):
                return False
            self._restore(snapshot, owners, module, node)  # copies what was copied once: no Unsupported
            del stack[len(stack) - (count - 1):]
            restored.append(count)
            return True

        def record(stack: list) -> bool:
            """At the first changed member: keep the state (when the entry was compared)."""
            if self._entry is None or restored == [first]:
                return False  # not compared, or resumed right here: the snapshot stays
            try:
                memo = {id(o): o for o in owners}
                state = copy_all([_vars(o, _CTX_SKIPPED if o is ctx else frozenset()) for o in owners], memo, {})
            except Unsupported:
                return False
            self.snapshot = Snapshot(key, index, tuple(module.body[:index]), module, node, tuple(members[:first]),
                                     self._entry, state, owners)
            return False

        return {id(members[0]): enter, id(members[first]): record}

    @staticmethod
    def _reads_same(snapshot: Snapshot, members) -> bool:
        """Is every member the covered walk read through the class node the same node now?"""
        reads = snapshot.state[0].get("reads", ())
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
        kept = snapshot.state[0]["_guard_nodes"]
        marks.clear()
        memo[id(kept)] = marks
        for owner, state in zip(owners, copy_all(snapshot.state, memo, ints)):
            for name, value in state.items():
                setattr(owner, name, value)
        marks.update(ints.get(n, n) for n in kept)
        assert ctx._guard_nodes is marks
