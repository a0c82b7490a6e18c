"""Which scopes of a file may hold a value the device dataflow calls on the device (a pre-check).

:class:`DevScopes` reads a file's stdlib ``ast`` and says, for each function (and the module
body), whether :class:`devlint.dataflow.DeviceFlow` may see there a value of the kind ``DEV``
or ``DEVB`` (a tensor, a batch or a module on an accelerator), or evidence that a batch was
partly moved. Such a value starts only at a device move (``.cuda()``, ``.to(<not a dtype, not
"cpu">)``, :func:`devlint.precheck_predicates.may_move`) or at a call given ``device=`` (a
factory on a device); a project helper that moves its argument makes the rule run without
the pre-check (``devlint.project.index.View.forced_rules``). From the function that holds
one it reaches another only as the dataflow lets it:

- a closure reads a module bound in an enclosing function or the module body
  (``DeviceFlow.lookup``: models, never tensors; here any value counts);
- a method reads ``self.<x>`` that a method of its class assigns (``ClassInfo.attrs``);
- a call of a module-level function reads that function's summary (its returns).

DEV111 (:mod:`devlint.rules.input_not_on_model_device`) reports a call only where its frame
may see such a value, except a call of a module-level function's own parameter, which is
judged against the call sites (``ModelCallCheck.requirements_met``). An over-approximation:
moves anywhere in a function, nested functions included, count for it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .batches import BATCH_CALL
from .flow_tables import _LOSS_CALLEE, _LOSS_CLASS, _MODEL_METHODS
from .precheck_predicates import dotted, may_move

if TYPE_CHECKING:  # annotations only
    from .precheck_predicates import Facts

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def constructed_loss(call: ast.Call) -> bool:
    """Is ``call`` a loss class built and called in one expression (``nn.MSELoss()(out, y)``,
    ``FrobeniusNormLoss()(est, igt)``), which the dataflow takes for a loss?"""
    func = call.func
    return func.__class__ is ast.Call and bool(_LOSS_CLASS.match((dotted(func.func) or "").rsplit(".", 1)[-1]))
#: match patterns that bind a name (``case x``, ``case [*rest]``, ``case {**rest}``)
_CAPTURES = (ast.MatchAs, ast.MatchStar, ast.MatchMapping)


class _Frame:
    """What one function (or the module body, ``node`` None) holds outside its nested
    functions: does it move or build on a device, the plain names it calls, the attribute
    names it reads and stores."""

    __slots__ = ("node", "parent", "cls", "own", "sub", "moves", "roots", "params", "called", "reads", "stores",
                 "names", "children", "sees")

    def __init__(self, node: ast.AST | None, parent: "_Frame | None", cls: ast.ClassDef | None) -> None:
        self.node, self.parent, self.cls = node, parent, cls
        self.own = self.sub = self.moves = self.sees = False
        self.called: set[str] = set()
        self.names: set[str] = set()
        #: the root names of this function's device moves (``x`` of ``x[0].float().to(d)``)
        self.roots: set[str] = set()
        self.params: set[str] = set() if node is None else _parameters(node, cls)
        self.reads: set[str] = set()
        self.stores: set[str] = set()
        self.children: list[_Frame] = []


class DevScopes:
    """The device scopes of one file (see the module docstring); build it with :meth:`of`."""

    def __init__(self, facts: Facts, dtypes: frozenset[str]) -> None:
        # no reference back to ``facts``: kept in ``facts.memo``, it would make a cycle that
        # holds the file's whole ``ast`` until a collector pass (the collector is off while
        # libcst parses: +190 MB at 100k lines); the methods that need the facts are given them
        self.module = _Frame(None, None, None)
        self.frames: dict[int, _Frame] = {}
        self.top: dict[str, list[_Frame]] = {}
        #: the methods of each class (``id`` of the ``ClassDef``)
        self.by_class: dict[int, list[_Frame]] = {}
        self._collect(facts, dtypes)
        self._settle()

    @classmethod
    def of(cls, facts: Facts, dtypes: frozenset[str]) -> "DevScopes | Deferred":
        """The scopes of ``facts``' file, computed once per file (kept in ``facts.memo``) when
        :meth:`Deferred.may_report` is first asked: a file whose calls all go by before (no
        argument, another callee) never walks its tree again (each100k.py: 100k ``.cuda()``)."""
        found = facts.memo.get("dev_scopes")
        return Deferred(dtypes) if found is None else found

    @classmethod
    def built(cls, facts: Facts, dtypes: frozenset[str]) -> "DevScopes":
        """The scopes of ``facts``' file, built now unless ``facts.memo`` holds them."""
        found = facts.memo.get("dev_scopes")
        if found is None:
            found = facts.memo["dev_scopes"] = cls(facts, dtypes)
        return found

    # -- collection ------------------------------------------------------------------------------
    def _collect(self, facts: Facts, dtypes: frozenset[str]) -> None:
        tree = facts.tree
        # (node, its frame, the class whose body directly holds it, else None)
        stack: list = [(s, self.module, None) for s in tree.body]
        pop, push, AST = stack.pop, stack.append, ast.AST
        Call, Attribute, Name, Store, Stmt = ast.Call, ast.Attribute, ast.Name, ast.Store, ast.stmt
        while stack:
            node, frame, cls = pop()
            t = node.__class__
            if t in _DEFS:
                child = _Frame(node, frame, cls)
                frame.children.append(child)
                self.frames[id(node)] = child
                if frame is self.module:
                    self.top.setdefault(node.name, []).append(child)
                for part in (*node.decorator_list, node.args, *([node.returns] if node.returns else [])):
                    push((part, frame, None))  # evaluated where the def stands
                for statement in node.body:
                    push((statement, child, None))
                continue
            if t is ast.ClassDef:
                for part in (*node.decorator_list, *node.bases, *node.keywords):
                    push((part, frame, None))
                for statement in node.body:
                    push((statement, frame, node))  # a class body runs in the enclosing frame
                continue
            if t is Call:
                func = node.func
                if func.__class__ is Name:
                    frame.called.add(func.id)
                if func.__class__ is Attribute and func.attr in ("to", "cuda") and may_move(node, facts, dtypes):
                    frame.own = True
                    root = _root(func.value)
                    if root is None:
                        frame.moves = True  # next(iter(loader)).to(d), loader.next_batch().cuda(): a batch
                    else:
                        frame.roots.add(root)
                elif not frame.own and any(kw.arg == "device" for kw in node.keywords):
                    frame.own = True
            elif t is Attribute:
                (frame.stores if node.ctx.__class__ is Store else frame.reads).add(node.attr)
            elif t is Name:
                if node.ctx.__class__ is Store:
                    frame.names.add(node.id)
                continue
            elif t is ast.Constant:
                continue
            elif t in _CAPTURES:
                bound = node.rest if t is ast.MatchMapping else node.name
                if bound:
                    frame.names.add(bound)
            for field in t._fields:
                value = getattr(node, field, None)
                if value.__class__ is list:
                    for item in value:
                        if isinstance(item, AST):  # a def under an if/try of a class body is a method
                            push((item, frame, cls if isinstance(item, Stmt) else None))
                elif isinstance(value, AST):
                    push((value, frame, None))

    def _settle(self) -> None:
        """``sub`` (a move or ``device=`` in the function or a function nested in it), then
        ``sees`` to a fixpoint."""
        order: list[_Frame] = []
        stack = [self.module]
        while stack:
            frame = stack.pop()
            order.append(frame)
            stack.extend(frame.children)
        for frame in reversed(order):  # children before parents
            frame.sub = frame.own or any(c.sub for c in frame.children)
            frame.moves = frame.moves or not frame.roots.isdisjoint(frame.params | frame.names)
        functions = order[1:]
        by_class = self.by_class
        for frame in functions:
            if frame.cls is not None:
                by_class.setdefault(id(frame.cls), []).append(frame)
        # the module body lends what its own statements (not its functions) bind
        self.module.sees = self.module.own
        changed = True
        while changed:
            changed = False
            dev_functions = {name for name, frames in self.top.items() if any(f.sees for f in frames)}
            if not self.module.sees and self.module.called & dev_functions:
                self.module.sees = changed = True
            for frame in functions:
                if frame.sees:
                    continue
                if frame.sub or frame.parent.sees or frame.called & dev_functions or self._class_lends(frame):
                    frame.sees = changed = True

    def _class_lends(self, frame: _Frame) -> bool:
        """Does a method that may see a device value store an attribute this function reads
        (this function a method, or nested in one)?"""
        owner = frame
        while owner is not None and owner.cls is None:
            owner = owner.parent  # a function nested in a method reads the method's self
        return owner is not None and bool(frame.reads) and self._class_stores(owner, frame.reads)

    # -- queries ---------------------------------------------------------------------------------
    def may_report(self, call: ast.Call, context: ast.AST, facts: Facts) -> bool:
        """May DEV111 report ``call``, whose innermost ``def`` is ``context`` (anything else
        stands for the module body)? Where its frame may see no device value: only a call of a
        module-level function's own parameter. Where the frame moves no value that may be an
        item of a batch (it moves only ``self``'s attributes, a global or a fresh tensor, or
        only reads device values: ``device=`` factories, ``self.<x>``, a closure, a helper's
        result), no batch is partly moved there (``DeviceFlow`` reads the moves of a frame's
        own body, nested functions left out; an item is a parameter, a name bound in the
        frame, or what a call of a plain name or a batch method gives), so only a loss (:meth:`loss_callee`), a callee
        that may hold a device value (:meth:`_device_callee`) or such a parameter can be
        reported (``ModelCallCheck.check_call``'s other cases need a moved group)."""
        frame = self.frames.get(id(context), self.module)
        if frame.moves:
            return frame.sees
        if self.param_callee(call, frame):
            return True
        return frame.sees and (self.loss_callee(call, facts) or self._device_callee(call, frame))

    def param_callee(self, call: ast.Call, frame: _Frame) -> bool:
        """Is ``call`` a call of a parameter of a module-level function (``model(x)``,
        ``model.forward(x)`` of ``def f(model, x)``), which the dataflow judges by what the
        call sites pass?"""
        if frame.parent is not self.module or frame is self.module:
            return False
        func = call.func
        if func.__class__ is ast.Attribute and func.attr in _MODEL_METHODS:
            func = func.value
        if func.__class__ is not ast.Name:
            return False
        args = frame.node.args
        return any(a.arg == func.id for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))

    def loss_callee(self, call: ast.Call, facts: Facts) -> bool:
        """May the dataflow take the callee for a loss: a dotted name with a part named like one
        (``criterion``, ``self.loss_fn``: ``ModelCallCheck.loss_named``), a ``torch.nn.functional``
        loss through the imports, or, where the file builds a ``*Loss`` module, any callee
        that may hold it (a name or an attribute)?"""
        if constructed_loss(call):
            return True
        name = dotted(call.func)
        if name is None:
            return False
        if any(_LOSS_CALLEE.match(part) for part in name.split(".")):
            return True
        for full in facts.resolve(call.func):
            last = full.rsplit(".", 1)[-1]
            if full.startswith("torch.nn.functional.") and ("loss" in last or "entropy" in last or last == "kl_div"):
                return True
        return _builds_loss(facts)

    def _device_callee(self, call: ast.Call, frame: _Frame) -> bool:
        """May the callee hold a device value (``DeviceFlow._callee``): a name bound in this
        function or in an enclosing one that may see one, ``<name>.<x>`` in a method where a
        method of the class that may see one stores ``x``, or the receiver of
        ``.forward/.generate/.encode`` so read?"""
        func = call.func
        if func.__class__ is ast.Attribute and func.attr in _MODEL_METHODS:
            func = func.value
        if func.__class__ is ast.Name:
            scope = frame
            while scope is not None:
                if func.id in scope.names and scope.sees:
                    return True
                scope = scope.parent
            return False
        if func.__class__ is ast.Attribute and func.value.__class__ is ast.Name and frame.cls is not None:
            return self._class_stores(frame, {func.attr})
        return False

    def _class_stores(self, method: _Frame, attrs: set[str]) -> bool:
        """Does a function of ``method``'s class that may see a device value store one of ``attrs``?"""
        for other in self.by_class.get(id(method.cls), ()):
            if other.sees and not other.stores.isdisjoint(attrs):
                return True
            for nested in _nested(other):
                if nested.sees and not nested.stores.isdisjoint(attrs):
                    return True
        return False


class Deferred:
    """:class:`DevScopes` of a file not built yet: the first :meth:`may_report` builds them
    (:meth:`DevScopes.built`). Holds no ``Facts`` (they are handed in, as to ``DevScopes``)."""

    __slots__ = ("dtypes", "scopes")

    def __init__(self, dtypes: frozenset[str]) -> None:
        self.dtypes = dtypes
        self.scopes: DevScopes | None = None

    def may_report(self, call: ast.Call, context: ast.AST, facts: Facts) -> bool:
        """:meth:`DevScopes.may_report`, the scopes built at the first call."""
        if self.scopes is None:
            self.scopes = DevScopes.built(facts, self.dtypes)
        return self.scopes.may_report(call, context, facts)


def _parameters(function: ast.AST, cls: ast.ClassDef | None) -> set[str]:
    """The parameters of a ``def`` but a method's ``self`` (``DeviceFlow`` gives ``self`` no
    batch, and what it holds never belongs to one)."""
    args = function.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    static = any(dotted(d) == "staticmethod" for d in function.decorator_list)
    positional = [*args.posonlyargs, *args.args]
    if cls is not None and positional and not static:
        names.remove(positional[0].arg)
    return set(names)


def _root(expr: ast.AST) -> str | None:
    """The name a moved value comes from (``x`` of ``x[0].float()``); ``None`` where the
    value may be a batch by itself: a call of a plain name (``next(iter(loader))``), a method
    named for handing out batches (``loader.next_batch()``, :data:`devlint.batches.BATCH_CALL`)
    or any other expression."""
    while True:
        t = expr.__class__
        if t is ast.Name:
            return expr.id
        if t is ast.Attribute or t is ast.Subscript:
            expr = expr.value
        elif t is ast.Call and expr.func.__class__ is ast.Attribute and not BATCH_CALL.match(expr.func.attr):
            expr = expr.func.value
        else:
            return None


def _nested(frame: _Frame):
    stack = list(frame.children)
    while stack:
        inner = stack.pop()
        yield inner
        stack.extend(inner.children)


def _builds_loss(facts: Facts) -> bool:
    """Does the file define or call a ``*Loss`` (a method or function key ending in ``Loss``)?"""
    found = facts.memo.get("builds_loss")
    if found is None:
        found = facts.memo["builds_loss"] = any(
            key.endswith("Loss") for table in (facts.methods, facts.functions) for key in table)
    return found
