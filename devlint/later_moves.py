"""Moves of a batch's items written anywhere on the straight path of a loop's or a step function's body.

DEV111 reads a batch as partly moved once one of its items goes to a device (the author's
own code then says where the model lives). The dataflow walks statements in source order, so
``for x, y in loader: out = model(x.to(d)); loss = crit(out, y.to(d))`` would learn that the
batch is moved only after ``out`` was computed. :func:`moves_items` reads the whole body
first: the items (the loop's names, or the names bound from them, ``inputs, labels = data``)
that some statement of the body moves with ``.to(<device>)``/``.cuda()``.
"""

from __future__ import annotations

from typing import Callable, Iterable

import libcst as cst


def root_name(expr: cst.BaseExpression | None) -> str | None:
    """The name an item expression starts from: ``batch`` of ``batch["x"][0].float()``."""
    while expr is not None:
        t = expr.__class__
        if t is cst.Name:
            return expr.value
        if t is cst.Attribute or t is cst.Subscript:
            expr = expr.value
        elif t is cst.Call and expr.func.__class__ is cst.Attribute:
            expr = expr.func.value
        else:
            return None
    return None


def _target_names(target: cst.BaseExpression) -> Iterable[str]:
    if target.__class__ is cst.Name:
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif target.__class__ is cst.StarredElement:
        yield from _target_names(target.value)


def dotted_last(func: cst.BaseExpression) -> str | None:
    """The last name of a callee: ``zip`` of ``zip``, ``tqdm`` of ``tqdm.tqdm``."""
    if func.__class__ is cst.Name:
        return func.value
    if func.__class__ is cst.Attribute:
        return func.attr.value
    return None


class _Collector(cst.CSTVisitor):
    """Plain assignments (target names, the roots of the value's elements) and move calls."""

    def __init__(self, straight: bool) -> None:
        self.straight = straight
        self.assigns: list[tuple[list[str], set[str]]] = []
        self.moves: list[cst.Call] = []
        #: ``device = x.device``: names that hold the device of another value
        self.devices: dict[str, cst.BaseExpression] = {}
        #: calls whose result is thrown away (``x.to(d)`` as a statement moves no tensor)
        self.dropped: set[int] = set()
        #: move call -> the names the assignment around it binds (``data_cuda = data.to(d)``)
        self.bound_to: dict[int, frozenset[str]] = {}
        self._binding: list[frozenset[str]] = []

    def visit_Expr(self, node: cst.Expr) -> None:
        value = node.value
        for call in value.elements if isinstance(value, (cst.Tuple, cst.List)) else [value]:
            self.dropped.add(id(getattr(call, "value", call)))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested def runs later, with arguments of its own

    # a move under an ``if``, a ``try`` or an inner loop may be on another path than the use
    # (``if isinstance(data, Mapping): model(data) else: model(data[0].to(d))``): only the
    # straight-line statements of the body count (``with`` blocks included)
    def visit_If(self, node: cst.If) -> bool:
        return not self.straight

    def visit_Try(self, node: cst.Try) -> bool:
        return not self.straight

    def visit_For(self, node: cst.For) -> bool:
        if not self.straight:  # for y in labels: y is bound from labels (the whole body is read)
            self._bind_iteration(node.target, node.iter)
        return not self.straight

    def visit_CompFor(self, node: cst.CompFor) -> None:
        if not self.straight:  # [{k: v.to(d) for k, v in y.items()} for y in labels]: v from labels
            self._bind_iteration(node.target, node.iter)

    def _bind_iteration(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        """Names a loop or a comprehension binds, recorded as bound from the root of what it
        iterates (``enumerate``/``zip`` of names: from each of them)."""
        values = [iterable]
        if iterable.__class__ is cst.Call and (dotted_last(iterable.func) in ("enumerate", "zip", "tqdm")):
            values = [a.value for a in iterable.args if a.keyword is None]
        roots = {r for r in map(root_name, values) if r is not None}
        if roots:
            self.assigns.append((list(_target_names(target)), roots))

    def visit_While(self, node: cst.While) -> bool:
        return not self.straight

    def visit_Match(self, node: cst.Match) -> bool:
        return not self.straight

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        values = [e.value for e in value.elements] if isinstance(value, (cst.Tuple, cst.List)) else [value]
        roots = {r for r in map(root_name, values) if r is not None}
        if len(node.targets) == 1 and node.targets[0].target.__class__ is cst.Name:
            if value.__class__ is cst.Attribute and value.attr.value == "device":
                self.devices[node.targets[0].target.value] = value.value
        bound: set[str] = set()
        for target in node.targets:
            self.assigns.append((list(_target_names(target.target)), roots))
            bound.update(_target_names(target.target))
        self._binding.append(frozenset(bound))

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._binding.pop()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if func.__class__ is cst.Attribute and func.attr.value in ("to", "cuda"):
            self.moves.append(node)
            if self._binding:
                self.bound_to[id(node)] = self._binding[-1]


def copies(call: cst.Call, bound: Iterable[str] | None) -> bool:
    """``adv = x.clone().detach().to(d)``: a move of a copy bound to another name than the one
    it copies. The original is kept beside its copy on purpose (adversarial attacks perturb the
    copy): that says nothing of where the original's batch lives."""
    if call.func.__class__ is not cst.Attribute:
        return False
    root = root_name(call.func.value)
    if not bound or root is None or root in bound:
        return False
    expr = call.func.value
    while expr.__class__ is cst.Call and expr.func.__class__ is cst.Attribute:
        if expr.func.attr.value == "clone":
            return True
        expr = expr.func.value
    return False


def collected(body: cst.CSTNode, straight: bool = True, remembered: Callable | None = None) -> _Collector:
    """The assignments and move calls of ``body`` (of its straight path only, when
    ``straight``): a pure function of the immutable node (the language server keeps it between
    lints, ``Context.remembered``). With ``remembered``, that of each statement of an indented
    block is kept (the visitor carries nothing from one statement to the next: the block's
    result is theirs joined in order), so an edit collects again only the statements it made."""
    statements = body.body if remembered is not None and body.__class__ is cst.IndentedBlock else None
    if statements is None:
        seen = _Collector(straight)
        body.visit(seen)
        return seen
    kind = "moves-of" if straight else "all-moves-of"
    joined = _Collector(straight)
    for statement in statements:
        part = remembered(kind, statement, lambda statement=statement: collected(statement, straight))
        joined.assigns.extend(part.assigns)
        joined.moves.extend(part.moves)
        joined.devices.update(part.devices)
        joined.dropped.update(part.dropped)
        joined.bound_to.update(part.bound_to)
    return joined


def moves_items(body: cst.CSTNode, names: Iterable[str], is_move: Callable[[cst.Call], bool],
                other_device: Callable[[cst.BaseExpression], bool], seen: _Collector | None = None,
                straight: bool = True, related: Iterable[str] = (),
                reads: Callable[[], frozenset[str] | None] | None = None) -> bool:
    """Does ``body`` move, anywhere, an item that starts from one of ``names`` or from a name
    bound from them (in any order: ``y = batch[1]`` then ``y.to(d)``)? ``is_move`` tells a
    device move from a dtype cast or a ``.to("cpu")``. Not counted: a move whose result is
    thrown away, a move of a name also bound from something else (``scale, zp =
    obs.get_qparams()`` then ``scale.cuda()``), and a move onto ``device`` bound from
    ``x.device`` where ``other_device(x)`` (the device of another value says where that one
    is, not that the batch came unmoved). ``seen``: :func:`collected` of ``body``, if had;
    ``straight``: only the statements on the straight path of the body count (not those under
    an ``if``, a ``try`` or an inner loop); ``related``: names of the same batch that are no
    items of it themselves (``pair`` of ``images, target = pair``): a binding from them is no
    rebinding from elsewhere; ``reads``: gives the names the function reads (:func:`read_names`),
    or None if unknown, asked only for a move bound to names: a move bound only to names outside
    them (a dead store) is not counted."""
    if seen is None:
        seen = collected(body, straight)
    if not seen.moves:
        return False
    reach = _closure(seen, set(names))
    known = _closure(seen, reach | set(related))
    for targets, roots in seen.assigns:
        if not roots & known:
            reach -= set(targets)  # rebound from elsewhere somewhere in the body
    for call in seen.moves:
        if id(call) in seen.dropped or root_name(call.func.value) not in reach or not is_move(call):
            continue
        bound = seen.bound_to.get(id(call))
        if copies(call, bound):
            continue
        if bound and reads is not None:
            read = reads()
            if read is not None and not bound & read:
                continue  # data_cuda = data.to(d) with data_cuda never read
        target = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
        if target is not None and target.__class__ is cst.Name and target.value in seen.devices:
            if other_device(seen.devices[target.value]):
                continue
        return True
    return False


def _closure(seen: _Collector, reach: set[str]) -> set[str]:
    """``reach`` and the names bound from it (short chains: ``x, y = batch; inputs = x``)."""
    for _ in range(4):
        grown = False
        for targets, roots in seen.assigns:
            if roots & reach:
                new = set(targets) - reach
                if new:
                    reach |= new
                    grown = True
        if not grown:
            break
    return reach


class _Reads(cst.CSTVisitor):
    """Every name a node reads: each ``Name`` except the plain names an assignment binds."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.bound: set[int] = set()

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.bound.update(id(n) for n in _bound_name_nodes(node.target))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self.bound:
            self.names.add(node.value)


def _bound_name_nodes(target: cst.BaseExpression) -> Iterable[cst.Name]:
    if target.__class__ is cst.Name:
        yield target
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _bound_name_nodes(element.value)
    elif target.__class__ is cst.StarredElement:
        yield from _bound_name_nodes(target.value)


def read_names(node: cst.CSTNode) -> frozenset[str]:
    """The names ``node`` (a function, a module) reads anywhere, nested functions included.
    A batch item moved into a name outside this set (``data_cuda = data.to(d)`` and
    ``data_cuda`` never used) says nothing of where the model lives: DEV111 takes no
    evidence from it (pyod 3.6.7 devnet.py, whose model is never moved). A pure function of
    the immutable node."""
    seen = _Reads()
    node.visit(seen)
    return frozenset(seen.names)
