"""The walk's state, copied and compared: what :mod:`devlint.resume` and
:mod:`devlint.resume_tail` keep of the participants between lints of one document.

The state is every attribute of the context and of each participant, down through containers
and plain objects; libcst nodes (immutable) are kept, not copied, and compared by identity.
"""

from __future__ import annotations

import re
import types

import libcst as cst

#: values copied and compared as they are
ATOMS = frozenset({int, float, complex, str, bytes, bool, type(None), type, range, re.Pattern,
                    types.BuiltinFunctionType, types.FunctionType})
#: context attributes that are not walk state (the text, the cross-lint memo, the project view)
CTX_SKIPPED = frozenset({"text", "path", "_kept", "project"})


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


def is_node(value) -> bool:
    """Is ``value`` a libcst node? (Asked once per type: ``isinstance`` on libcst's abstract
    base costs a registry lookup per call.)"""
    cls = value.__class__
    found = _NODE_TYPES.get(cls)
    if found is None:
        found = _NODE_TYPES[cls] = issubclass(cls, cst.CSTNode)
    return found


_NODE_TYPES: dict[type, bool] = {}


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
        if cls in ATOMS:
            add(value if cls is not types.FunctionType else ("f", id(value)))
            continue
        key = id(value)
        if key in tokens:
            add(tokens[key])
            continue
        if key in seen:
            add(("r", seen[key]))
            continue
        if is_node(value):
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
        if cls in ATOMS or is_node(value):
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
    if cls in ATOMS:
        return value
    key = id(value)
    found = memo.get(key)
    if found is not None:
        return found
    if is_node(value):
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


def plain(value, avoid: set[int]) -> bool:
    """Is ``value`` lists, dicts and sets of atoms, nodes and tuples of them, with no int in
    ``avoid`` (ids a copy would map to others): :func:`thaw` copies it as :func:`copy_state`
    would, without the bookkeeping."""
    stack = [value]
    while stack:
        item = stack.pop()
        cls = item.__class__
        if cls is int:
            if item in avoid:
                return False
        elif cls is list or cls is tuple or cls is set or cls is frozenset:
            stack.extend(item)
        elif cls is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif cls not in ATOMS and not is_node(item):
            return False
    return not _holds_containers_in_tuples(value)


def _holds_containers_in_tuples(value) -> bool:
    """Does a tuple (or a set's or a dict key's item) under ``value`` hold a list, dict or set
    (which :func:`thaw` would leave shared)?"""
    stack, inside = [(value, False)], False
    while stack:
        item, inside = stack.pop()
        cls = item.__class__
        if cls is list or cls is dict or cls is set:
            if inside:
                return True
            stack.extend((v, False) for v in (item.values() if cls is dict else item))
        elif cls is tuple or cls is frozenset:
            stack.extend((v, True) for v in item)
    return False


def thaw(value):
    """A copy of a :func:`plain` value: new lists, dicts and sets, the rest (immutable) kept."""
    cls = value.__class__
    if cls is list:
        return [thaw(v) for v in value]
    if cls is dict:
        return {k: thaw(v) for k, v in value.items()}
    if cls is set:
        return set(value)
    return value


def project_deps(project) -> dict | None:
    """The other project files a walk read so far, with their content hash then
    (:attr:`devlint.project.index.View.deps`); ``None`` without a project view."""
    return None if project is None else dict(project.deps)


def deps_current(deps: dict | None, project) -> bool:
    """Are the files ``deps`` (of :func:`project_deps`) what the project index reads now (a
    state walked with them may be put back), with a view exactly where ``deps`` came from one?"""
    if deps is None or project is None:
        return deps is None and project is None
    digest = project.index.digest
    return all(digest(path) == hashed for path, hashed in deps.items())


#: the context's own logs: reports filed, node ids marked guarded, what the walk read
CTX_LOGS = ("reports", "_guard_nodes", "reads")


def logs_of(owner, ctx) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(log attributes, scratch attributes) of one owner of walk state (the context, or a
    participant: :attr:`devlint.rule.Participant.walk_logs` and ``walk_scratch``)."""
    if owner is ctx:
        return CTX_LOGS, ()
    return tuple(getattr(owner, "walk_logs", ())), tuple(getattr(owner, "walk_scratch", ()))


def owner_vars(owner, skipped: frozenset) -> dict:
    """The attributes of one owner of walk state (the context, a participant), less ``skipped``."""
    return {name: value for name, value in vars(owner).items() if name not in skipped}
