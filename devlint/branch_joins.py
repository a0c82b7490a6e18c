"""Where control flow joins in the device dataflow: the two arms of an ``if``, a ``try``'s paths.

Mixed into :class:`devlint.dataflow.DeviceFlow`. An ``if`` is walked arm by arm from the names
before it; after it, a name keeps its kind where both arms agree, counts as moved where one arm
moves it under a device test (``if use_cuda: x = x.cuda()``), and counts as left on the CPU
where one arm hands an item of a partly moved batch on unmoved (DEV111). After a ``try``, the
body (if it falls through) and each handler that falls through are joined the same way.
The state (``_branches``, ``_tries``) is set up by ``DeviceFlow.__init__``.
"""

from __future__ import annotations

import libcst as cst

from .arm_bindings import bindings, bound_only_in, bound_to_none
from .branch_tests import asks_for_accelerator, not_none_names
from .flow_kinds import CPU, CPUB, DEV, DEVB, MODEL, PARAM, PB, PITEM, V
from .later_moves import collected, moves_items


#: what a value left on the other arm of ``if use_cuda: x = x.cuda()`` may be
_UNMOVED = frozenset({CPU, CPUB, PITEM, PB, PARAM, MODEL})


def _moved_on_one_arm(a: V | None, b: V | None, before: V | None) -> V | None:
    """The join of ``if use_cuda: x = x.cuda()`` (or ``if x is not None:``): one arm moved
    ``x`` (``a`` or ``b`` is ``DEV``/``DEVB``), the other left the value it had before the
    ``if`` (the run without an accelerator, where the model stays on the CPU too, or ``x`` is
    ``None``): moved. ``None`` (unknown) otherwise."""
    for moved, other in ((a, b), (b, a)):
        if moved is None or moved.kind not in (DEV, DEVB) or other is not before:
            continue
        if before is None or (before.kind in _UNMOVED and (moved.module == before.module or before.kind in (MODEL, PARAM))):
            return moved
    return None


def _one_batch(a: V | None, b: V | None) -> V | None:
    """``if forget: dcur, dgaps = data else: dcur = data``: both arms bind the same batch or a
    part of it (one group), so what is taken from the name after the ``if`` is an item of that
    batch either way. ``None`` otherwise."""
    if a is None or b is None or a.group is None or a.group != b.group or a.module or b.module:
        return None
    if {a.kind, b.kind} <= {PB, PITEM} and a.kind != b.kind:
        return V(PB, group=a.group, param=a.param or b.param)
    return None


def _kept_unmoved(a: V | None, b: V | None, before: V | None, moved: set) -> V | None:
    """``y = y.to(d); if adv: data = attack(data, y)``: one arm keeps an item of a batch whose
    sibling moved before the ``if`` (``moved``) as it was, the other binds another tensor (a
    helper's result, a move): the run that takes the first arm hands the CPU tensor on.
    ``None`` otherwise."""
    if before is None or before.group is None or before.group not in moved or before.kind not in (PITEM, CPU):
        return None
    if before.module or before.explicit:
        return None
    for kept, other in ((a, b), (b, a)):
        if kept is before and (other is None or not other.module):
            return before
    return None


def _unmoved_beside_moved_arm(a: V | None, b: V | None, moved: set) -> V | None:
    """``weak = data["w"].cuda(); if remix: strong = data["s0"] else: strong = data["s"].cuda()``:
    one arm moves an item of a batch whose sibling moved before the ``if`` (``moved``), the
    other binds an item of the same batch unmoved: the author's own code says where it belongs,
    so the run through the second arm hands the CPU tensor on."""
    for kept, other in ((a, b), (b, a)):
        if kept is None or other is None or kept.module or other.module or kept.explicit:
            continue
        if kept.kind in (PITEM, CPU) and other.kind == DEV and kept.group is not None and (
                other.group == kept.group and kept.group in moved):
            return kept
    return None


def _type_test(test: cst.BaseExpression) -> bool:
    """``isinstance(x, T)`` or ``not isinstance(x, T)``: a test of a value's type, not of whether
    it was given."""
    if test.__class__ is cst.UnaryOperation and test.operator.__class__ is cst.Not:
        test = test.expression
    return test.__class__ is cst.Call and test.func.__class__ is cst.Name and test.func.value == "isinstance"


def _names_under(expr: cst.BaseExpression) -> frozenset[str]:
    """The value of every name under an expression (``prefix_tokens`` of ``prefix_tokens is
    None and spec``), attribute names included, as ``CSTNode.children`` finds them: every
    node-valued field and every node in a sequence field (without libcst's visitor, which
    ``children`` runs: it was most of a long file's join cost)."""
    found: set[str] = set()
    stack: list = [expr]
    node_type = cst.CSTNode
    while stack:
        node = stack.pop()
        if node.__class__ is cst.Name:
            found.add(node.value)
            continue
        for name in node.__dataclass_fields__:
            value = getattr(node, name)
            if isinstance(value, node_type):
                stack.append(value)
            elif value.__class__ is tuple or value.__class__ is list:
                stack.extend(item for item in value if isinstance(item, node_type))
    return frozenset(found)


def _unmoved_against_moved(a: V | None, b: V | None, params: int) -> V | None:
    """``if weighted: targets = stack(...).to(d) else: targets = labels``: one arm puts the name
    on the device (a tensor it makes there), the other binds an item of a batch unmoved: the
    author's own code says where the value belongs, so the run through the second arm hands
    the CPU tensor on. (An item moved on one arm and not on the other, as in a dict-or-tuple
    batch, is left to :meth:`DeviceFlow._left_behind`.)"""
    for moved, other in ((a, b), (b, a)):
        if moved is None or other is None or moved.module or other.module or other.explicit:
            continue
        if other.group == params:
            continue  # a parameter of the function (an option given a default), not a loop's item
        if moved.kind == DEV and moved.group is None and other.group is not None and other.kind in (PITEM, CPU):
            return other  # a tensor made on the device, not another item of the batch moved
    return None


def _leaves(block) -> bool:
    """Does ``block`` end with ``raise``/``return``/``continue``/``break``?"""
    body = getattr(block, "body", ())
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine) and last.body:
        last = last.body[-1]
    return isinstance(last, (cst.Raise, cst.Return, cst.Continue, cst.Break))


class BranchJoins:
    """The joins of an ``if``'s arms and a ``try``'s paths (see the module docstring)."""

    # branches: the two arms of an ``if`` are joined
    def visit_If(self, node: cst.If) -> None:
        self._branches.append([node, dict(self.frame.vars), None, self.frame, set(self.frame.moved_groups)])

    def _end_arm(self, block) -> None:
        if self._branches:
            record = self._branches[-1]
            if record[0].body is block and record[3] is self.frame:
                record[2] = self.frame.vars
                self.frame.vars = dict(record[1])
                # a move on the body's arm says nothing of the else arm's run: it starts from the
                # groups moved before the if (both arms' moves count again after it)
                record.append(self.frame.moved_groups)
                self.frame.moved_groups = set(record[4])
                self._memo.clear()

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._end_arm(node)

    def leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._end_arm(node)

    def leave_If(self, node: cst.If) -> None:
        if not self._branches or self._branches[-1][0] is not node:
            return
        _, before, after_body, frame, moved_before, *body_moved = self._branches.pop()
        if body_moved and frame is self.frame:
            frame.moved_groups |= body_moved[0]
        if after_body is None or frame is not self.frame:
            return
        current = frame.vars
        joined = {}
        device_test = self.ctx.remembered("device-test", node.test, lambda: asks_for_accelerator(node.test))
        guarded = not_none_names(node.test)
        one_arm = self._one_arm_names(node, before, after_body, current)
        for name in set(after_body) | set(current):
            a, b = after_body.get(name), current.get(name)
            if a is b:  # untouched on both arms (or unknown on both): what the steps below give
                joined[name] = a
                continue
            if name in one_arm:  # bound on one arm only: a run that reads it took that arm
                joined[name] = a if name in after_body else b
                continue
            if a is None or b is None:
                kept = self._beside_none(node, name, a, b)
                if kept is not None:  # else: labels = None: a run that reads a tensor took the other arm
                    joined[name] = kept
                    continue
            same = a is not None and b is not None and a.kind == b.kind and a.module == b.module
            placed = a is not None and b is not None and {a.kind, b.kind} == {DEV, DEVB} and not (a.module or b.module)
            value = a if same else V(DEV) if placed else None  # a tensor or a list of them, moved
            if value is None and (device_test or name in guarded) and name in before:
                value = _moved_on_one_arm(a, b, before[name])
            elif value is None and not device_test and name not in guarded:
                value = self._left_behind(node, (a, after_body), (b, current), before)
                if value is None and name in before:
                    kept = _kept_unmoved(a, b, before[name], moved_before)
                    if kept is not None and name not in self._tested(node):
                        value = kept  # (not if pred is None: pred = self.helper(...): a default filled in)
                if value is None and name not in self._tested(node):
                    arm = node.body if b is not None and b.kind == DEV else node.orelse
                    if not _leaves(getattr(arm, "body", arm)):
                        value = _unmoved_beside_moved_arm(a, b, moved_before)
                if value is None and not _leaves(node.body) and not (
                        node.orelse.__class__ is cst.Else and _leaves(node.orelse.body)) and name not in self._tested(node):
                    value = _unmoved_against_moved(a, b, id(frame.node))
                    if value is not None:  # its own evidence: the other arm says where it belongs
                        value = V(value.kind, group=id(node))
                        frame.moved_groups.add(id(node))
            joined[name] = value if value is not None else _one_batch(a, b)
        frame.vars = joined
        self._memo.clear()

    def _beside_none(self, node: cst.If, name: str, a: V | None, b: V | None) -> V | None:
        """``if "labels" in batch: labels = batch["labels"] else: labels = None``: one arm binds
        a CPU tensor or an item of a batch, the other only ``None`` (a plain ``else``, not an
        ``elif``), so whatever computes with the name after the ``if`` holds the first arm's
        value, as ``labels if c else None`` does. ``None`` otherwise."""
        orelse = node.orelse.body if node.orelse.__class__ is cst.Else else None
        for kept, block in ((a, orelse), (b, node.body if orelse is not None else None)):
            if block is None or kept is None or kept.module or kept.explicit or kept.kind not in (CPU, CPUB, PITEM, PB):
                continue
            if name in self.ctx.remembered("bound-to-none", block, lambda: bound_to_none(block)):
                return kept
        return None

    def _one_arm_names(self, node: cst.If, before: dict, after_body: dict, current: dict) -> frozenset[str]:
        """The names unbound before the ``if`` that one arm binds, the other arm does not, and
        no other statement of the function binds (:mod:`devlint.arm_bindings`): after the ``if``
        they hold what that arm gave them. Empty in the module body (which other scopes may
        bind through ``global``)."""
        fn = self.frame.node
        if fn.__class__ is not cst.FunctionDef:
            return frozenset()
        new = [n for n in (*after_body, *current) if n not in before and ((n in after_body) != (n in current))]
        if not new:
            return frozenset()
        kept = self.__dict__.setdefault("_arm_bindings", {})  # per lint: node id -> its bindings
        if id(fn.body) not in kept:
            kept[id(fn.body)] = self.ctx.remembered("bindings", fn.body, lambda: bindings(fn.body))
        function_body = kept[id(fn.body)]
        out = set()
        for name in new:
            arm = node.body if name in after_body else node.orelse.body if node.orelse.__class__ is cst.Else else node.orelse
            if id(arm) not in kept:
                kept[id(arm)] = self.ctx.remembered("bindings", arm, lambda: bindings(arm))
            counted = kept[id(arm)]
            if name in bound_only_in(function_body, counted):
                out.add(name)
        return frozenset(out)

    def _tested(self, node: cst.If) -> frozenset[str]:
        """The names an ``if``'s test reads (``if prefix is None: prefix = ...``: a default
        filled in, not a batch item), once per test node (kept between a document's lints);
        not a type test (``if isinstance(x, np.ndarray): x = torch.from_numpy(x).to(d) else:
        ...``: both arms take the batch's item, one of each type)."""
        test = node.test
        if _type_test(test):
            return frozenset()
        return self.ctx.remembered("names-tested", test, lambda: _names_under(test))

    def _left_behind(self, node: cst.If, body_arm: tuple, else_arm: tuple, before: dict) -> V | None:
        """``if isinstance(data, Mapping): ... else: X, y = data; y = y.to(d)``: an arm that
        moves an item of a batch (on its straight path) and hands on another item of it unmoved
        makes that item unmoved after the ``if`` (a run taking that arm hands the CPU tensor on),
        whatever the other arm binds. Each arm: (the name's kind at its end, its names)."""
        orelse = node.orelse.body if node.orelse.__class__ is cst.Else else None
        for (v, env), block in ((body_arm, node.body), (else_arm, orelse)):
            if block is None or v is None or v.group is None or v.kind not in (PITEM, CPU) or v.module or v.explicit:
                continue
            if _leaves(block):
                continue  # an arm that returns or skips the rest hands nothing on
            names = sorted({n for n, w in (*before.items(), *env.items()) if w is not None and w.group == v.group})
            seen = self.ctx.remembered("later-moves", block, lambda: collected(block, remembered=self.ctx.remembered))
            if moves_items(block, names, self._device_move, self._other_value, seen, reads=self._reads):
                return v
        return None

    # try/except: the body is the path every run without an error takes
    def visit_Try(self, node: cst.Try) -> None:
        if node.handlers and not node.orelse:
            self._tries.append([node, None, [], self.frame])
        self._note_handler_moves(node)

    def _note_handler_moves(self, node: cst.Try) -> None:
        """``try: out = model(X[:1]) except TypeError: out = model(X.to(d))``: a handler that
        moves an item of a batch says where the author wants it, so the body (the path every
        run without an error takes) handing it on unmoved is the bug: its group counts as moved."""
        frame = self.frame
        groups: dict[int, list[str]] = {}
        for name, v in frame.vars.items():
            if v is not None and v.group is not None and v.kind in (PB, PITEM, CPU, CPUB) and v.group not in frame.moved_groups:
                groups.setdefault(v.group, []).append(name)
        for handler in node.handlers if groups else ():
            seen = self.ctx.remembered("later-moves", handler.body, lambda: collected(handler.body, remembered=self.ctx.remembered))
            for group, members in groups.items():
                if group not in frame.moved_groups and moves_items(handler.body, members, self._device_move, self._other_value, seen, reads=self._reads):
                    frame.moved_groups.add(group)

    def _try_record(self, node) -> list | None:
        if self._tries and self._tries[-1][3] is self.frame:
            record = self._tries[-1]
            if node is record[0].body or any(node is h for h in record[0].handlers):
                return record
        return None

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        record = self._try_record(node)
        if record is not None:
            if record[1] is None:
                record[1] = dict(self.frame.vars)  # the first handler: the body is done
            self.frame.vars = dict(record[1])  # each handler starts where the body may stop
            self._memo.clear()

    def leave_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        record = self._try_record(node)
        if record is None:
            return
        if not _leaves(node.body):
            record[2].append(self.frame.vars)
        if node is record[0].handlers[-1]:
            self._join_try(record)

    def _join_try(self, record) -> None:
        """After the handlers: a name keeps its kind when the body (if it falls through) and
        every handler that falls through agree; one left unmoved on any of these paths (a CPU
        tensor or an item of a batch) stays unmoved, since a run that takes that path hands the
        CPU tensor on; anything else is unknown."""
        self._tries.pop()
        node, body, arms, frame = record
        ends = arms if _leaves(node.body) else [body, *arms]
        if not ends:
            return  # nothing falls through: what follows is unreachable
        joined = {}
        for name in set().union(*ends):
            values = [end.get(name) for end in ends]
            a = values[0]
            unmoved = [v for v in values if v is not None and v.kind in (CPU, CPUB, PITEM, PB) and not v.module]
            same = all(v is not None and a is not None and v.kind == a.kind and v.module == a.module for v in values)
            joined[name] = a if same else unmoved[0] if unmoved else None
        frame.vars = joined
        self._memo.clear()

    def leave_Try(self, node: cst.Try) -> None:
        if self._tries and self._tries[-1][0] is node:
            self._tries.pop()  # a handler in another frame: nothing joined
