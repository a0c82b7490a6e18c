"""The mixed-precision analysis shared by DEV201-DEV208: autocast regions and GradScaler use.

Computed in the engine's single traversal (no second parse, no metadata providers):

* **Autocast regions**: ``torch.autocast``, ``torch.amp.autocast``, ``torch.cuda.amp.autocast``,
  ``torch.cpu.amp.autocast`` and the bare names imported from those modules, as a ``with``
  item (also among several items, or as either side of a conditional expression) and as a
  decorator, each with its device type, dtype and ``enabled`` argument (:class:`Region`).
* **Frames**: the module and every function are frames. Each frame records, in source order,
  the mixed-precision events of its own body (:class:`Event`): ``scaler.scale(loss)``,
  ``.backward()`` (scaled or not, and the autocast region it sits in), ``scaler.unscale_(opt)``,
  ``scaler.step(opt)``, ``scaler.update()``, a direct ``optimizer.step()``, a gradient clip and a
  module cast to float16. Every event carries its branch path (which arm of which ``if``) and
  its loops, so that rules can tell apart code on exclusive branches (``if scaler is not None:
  ... else: ...``, also across two ``if`` statements testing the same condition) and code in
  the same loop body.

A frame is complete when the traversal leaves it; the analysis then exposes it as
:attr:`AmpAnalysis.closed` until the next frame closes, which is when the rules' own
``leave_FunctionDef``/``leave_Module`` hooks (which run after the analysis's) read it.
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from .autocast import BoundContext, Region, bound_context, dtype_of, parse_region
from .modules import is_module_class, is_module_constructor, strip_module_methods
from .names import dotted
from .rule import Analysis, Rule, Site

GRAD_SCALERS = frozenset(
    {
        "torch.GradScaler",
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.cpu.amp.GradScaler",
        "torch.cpu.amp.grad_scaler.GradScaler",
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
    }
)
CLIPS = frozenset(
    {
        f"torch.nn.utils{sub}.{name}"
        for sub in ("", ".clip_grad")
        for name in ("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_")
    }
)
#: Receivers of ``.backward(...)`` that are not tensors (framework helpers that scale themselves).
_NOT_TENSORS = {
    "self", "accelerator", "fabric", "strategy", "precision", "precision_plugin", "trainer",
    "engine", "deepspeed", "model_engine", "manual_backward",
}
_OPTIMIZER = re.compile(r"(optim|^opt$|^opt_|_opt$|^opt\d)")
_MODULE_NAME = re.compile(r"(^|_)(model|net|network)$")
#: bound values that may make a name open an autocast region (:func:`bound_context`)
_MAY_OPEN = (cst.Call, cst.IfExp, cst.Lambda, cst.Name, cst.Attribute)


class Event:
    """One mixed-precision event of a frame (see the module docstring).

    ``kind``: ``"scale"``, ``"backward"``, ``"unscale"``, ``"step"`` (``scaler.step``),
    ``"update"``, ``"opt_step"`` (``optimizer.step()``), ``"zero_grad"`` (``optimizer.zero_grad()``),
    ``"clip"`` or ``"half"``.
    ``scaler`` is the scaler's dotted name, ``target`` the optimizer's (for ``opt_step`` the
    receiver); ``scaled`` tells a scaled backward; ``region`` the innermost autocast region a
    backward sits in."""

    __slots__ = ("kind", "node", "order", "path", "loops", "scaler", "target", "scaled", "region", "top")

    def __init__(self, kind, node, order, path, loops, scaler=None, target=None, scaled=False, region=None, top=0) -> None:
        self.kind, self.node, self.order, self.path, self.loops = kind, node, order, path, loops
        self.scaler, self.target, self.scaled, self.region = scaler, target, scaled, region
        self.top = top


class Frame:
    """The module or one function: its events, autocast regions and local bindings."""

    __slots__ = ("kind", "node", "parent", "events", "regions", "stack", "scalers", "optimizers", "modules", "scaled_names",
                 "built", "contexts", "opens")

    def __init__(self, kind: str, node: cst.CSTNode, parent: "Frame | None") -> None:
        self.kind, self.node, self.parent = kind, node, parent
        self.events: list[Event] = []
        #: every region opened in this frame, with the order of its opening
        self.regions: list[tuple[Region, int]] = []
        #: the regions open at the current point of the traversal
        self.stack: list[Region] = []
        self.scalers: set[str] = set()
        self.optimizers: set[str] = set()
        self.modules: set[str] = set()
        self.scaled_names: set[str] = set()
        #: scaler name -> (order, loops) of its first ``GradScaler(...)`` construction in this frame
        self.built: dict[str, tuple[int, tuple[int, ...]]] = {}
        #: name -> (the autocast context or factory bound to it, the path of that binding)
        self.contexts: dict[str, tuple[BoundContext, tuple]] = {}
        #: for a function: [an autocast it returns or yields inside, whether it may return other
        #: things, its key in AmpAnalysis.context_functions]
        self.opens: list = [None, False, ""]

    def of(self, *kinds: str) -> Iterator[Event]:
        return (e for e in self.events if e.kind in kinds)

    def chain(self) -> Iterator["Frame"]:
        frame: Frame | None = self
        while frame is not None:
            yield frame
            frame = frame.parent


class AmpAnalysis(Analysis):
    """Autocast regions and GradScaler use, per frame (see the module docstring)."""

    #: keyed by the ids of the nodes visited, read for the nodes of the frame being judged
    walk_logs = ("_arms", "loop_targets", "loop_nodes", "statements")
    walk_scratch = ("closed",)  # set by every leave_FunctionDef/leave_Module before a rule reads it

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.frame: Frame | None = None
        #: the frame the traversal has just left (read by the rules' leave hooks)
        self.closed: Frame | None = None
        self.self_scalers: set[str] = set()
        self.self_optimizers: set[str] = set()
        #: ``self.<x>`` bound to an autocast call anywhere in the file (see :meth:`_bind_context`)
        self.self_contexts: dict[str, tuple[BoundContext, tuple]] = {}
        #: functions (``name``, methods ``self.name``) of the file seen so far that return an
        #: autocast context or yield inside one (``@contextmanager``)
        self.context_functions: dict[str, BoundContext] = {}
        self.module_classes: set[str] = set()
        self._order = 0
        self._path: list[tuple[cst.If, int]] = []
        self._arms: dict[int, tuple[cst.If, int]] = {}
        self._loops: list[int] = []
        #: id of a ``for`` loop -> the names it binds (``for opt in optimizers``)
        self.loop_targets: dict[int, set[str]] = {}
        #: id of a ``for``/``while`` loop -> the loop (an event's ``loops`` are such ids)
        self.loop_nodes: dict[int, cst.CSTNode] = {}
        self._with_pushed: dict[int, int] = {}
        self._keys: dict[int, tuple[str, bool]] = {}
        self._printer = cst.Module(body=[])
        self.statements: dict[int, tuple[cst.BaseSmallStatement, cst.SimpleStatementLine]] = {}

    # -- frames -------------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self.frame = Frame("module", node, None)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        """For the rules' autofixes (:meth:`FrameRule.statement_of`), once for all of them:
        ``id(call)`` -> (statement, line) where a line holds one statement that is the call
        (``scaler.step(opt)``) or assigns it (``norm = clip_grad_norm_(...)``)."""
        body = node.body
        if len(body) == 1:
            small = body[0]
            kind = small.__class__
            if (kind is cst.Expr or kind is cst.Assign or kind is cst.AnnAssign) and small.value.__class__ is cst.Call:
                self.statements[id(small.value)] = (small, node)

    def leave_Module(self, node: cst.Module) -> None:
        self.closed = self.frame

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = Frame("function", node, self.frame)
        scope = self.ctx.scope  # the function's own (the engine enters it first)
        method = scope is not None and scope.parent is not None and scope.parent.kind == "class"
        frame.opens[2] = ("self." if method else "") + node.name.value
        for decorator in node.decorators:
            region = self.region(decorator.decorator)
            if region is not None:
                region.path = tuple(self._path)
                frame.regions.append((region, self._next()))
                frame.stack.append(region)
        self.frame = frame

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.closed = self.frame
        self.frame = frame.parent
        bound, other, key = frame.opens
        if bound is not None:  # `def maybe_autocast(): return autocast(...)`, a @contextmanager yielding under one
            bound.maybe_off = bound.maybe_off or other
            self.context_functions[key] = bound
        else:
            self.context_functions.pop(key, None)

    def visit_Return(self, node: cst.Return) -> None:
        frame = self.frame
        if frame is None or frame.kind != "function":
            return
        value = node.value
        bound = bound_context(value, self.ctx) if value is not None and value.__class__ in _MAY_OPEN else None
        if bound is not None and bound.region is not None:
            frame.opens[0] = frame.opens[0] or bound
        else:
            frame.opens[1] = True

    def visit_Yield(self, node: cst.Yield) -> None:
        frame = self.frame
        region = self.current_region()
        if frame is not None and frame.kind == "function" and region is not None and frame.opens[0] is None:
            decorators = {self.ctx.resolve(d.decorator) for d in frame.node.decorators}
            if "contextlib.contextmanager" in decorators:
                frame.opens[0] = BoundContext(region, maybe_off=region.enabled == "expr")

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if is_module_class(node, self.ctx, self.module_classes):
            self.module_classes.add(node.name.value)

    # -- branches and loops -------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        self._enter_arm(node)
        self._arms[id(node.body)] = (node, 0)
        if node.orelse is not None:
            self._arms[id(node.orelse)] = (node, 1)

    def leave_If(self, node: cst.If) -> None:
        self._leave_arm(node)

    def _enter_arm(self, node) -> None:
        arm = self._arms.get(id(node))
        if arm is not None:
            self._path.append(arm)

    def _leave_arm(self, node) -> None:
        if id(node) in self._arms:
            self._path.pop()

    visit_IndentedBlock = visit_SimpleStatementSuite = visit_Else = _enter_arm
    leave_IndentedBlock = leave_SimpleStatementSuite = leave_Else = _leave_arm

    def visit_For(self, node) -> None:
        self._loops.append(id(node))
        self.loop_nodes[id(node)] = node
        if node.__class__ is cst.For:
            target = node.target
            elements = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
            self.loop_targets[id(node)] = {n for n in map(dotted, elements) if n}
            if self.frame is not None and target.__class__ is cst.Name and self._scaled(node.iter):
                self.frame.scaled_names.add(target.value)  # for v in scaled_losses: v.backward()

    def leave_For(self, node) -> None:
        self._loops.pop()

    visit_While, leave_While = visit_For, leave_For

    def condition(self, test: cst.BaseExpression) -> tuple[str, bool]:
        """``(key, positive)`` of an ``if`` test: ``not x``, ``x is not None`` and plain ``x``
        share the key of ``x is None`` so that two ``if`` statements on one condition match."""
        cached = self._keys.get(id(test))
        if cached is not None:
            return cached
        positive = True
        expr = test
        while expr.__class__ is cst.UnaryOperation and expr.operator.__class__ is cst.Not:
            expr, positive = expr.expression, not positive
        code = self._printer.code_for_node
        if expr.__class__ is cst.Comparison and len(expr.comparisons) == 1:
            target = expr.comparisons[0]
            op = target.operator
            if isinstance(op, (cst.IsNot, cst.NotEqual)):
                positive = not positive
            if isinstance(op, (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)):
                word = "is" if isinstance(op, (cst.Is, cst.IsNot)) else "=="
                key = f"{code(expr.left).strip()} {word} {code(target.comparator).strip()}"
            else:
                key = code(expr).strip()
        elif isinstance(expr, (cst.Name, cst.Attribute)):
            key, positive = f"{code(expr).strip()} is None", not positive
        else:
            key = code(expr).strip()
        self._keys[id(test)] = (key, positive)
        return key, positive

    def compatible(self, a: "Event | Region", b: "Event | Region") -> bool:
        """Can both events (or an event and a region) run in one pass? False when they sit on
        opposite arms of one ``if`` (or of two ``if`` statements testing the same condition)."""
        if not a.path or not b.path:
            return True
        arms = {}
        for node, arm in a.path:
            key, positive = self.condition(node.test)
            arms[key] = arm if positive else 1 - arm
        for node, arm in b.path:
            key, positive = self.condition(node.test)
            mine = arms.get(key)
            if mine is not None and mine != (arm if positive else 1 - arm):
                return False
        return True

    # -- regions ------------------------------------------------------------------------------
    def region(self, expr: cst.BaseExpression) -> Region | None:
        """The autocast region this ``with`` item or decorator opens, if any
        (:func:`devlint.autocast.parse_region`)."""
        return parse_region(expr, self.ctx, getattr(self.ctx, "statement_index", 0))

    def dtype(self, expr: cst.BaseExpression) -> str | None:
        """``"float16"``/``"bfloat16"``/another torch dtype name, or ``None`` when unknown."""
        return dtype_of(expr, self.ctx)

    def visit_With(self, node: cst.With) -> None:
        pushed = 0
        for item in node.items:
            region = self.region(item.item)
            if region is None:
                region = self._bound_region(item.item)
            else:
                region.path = tuple(self._path)
            if region is not None:
                self.frame.regions.append((region, self._next()))
                self.frame.stack.append(region)
                pushed += 1
        if pushed:
            self._with_pushed[id(node)] = pushed

    def leave_With(self, node: cst.With) -> None:
        for _ in range(self._with_pushed.pop(id(node), 0)):
            self.frame.stack.pop()

    def _bound_region(self, expr: cst.BaseExpression) -> Region | None:
        """``with ctx:`` (or ``with ctx(...):`` for a factory) where ``ctx`` (or ``self.ctx``)
        was bound to autocast (:func:`devlint.autocast.bound_context`), on either arm of an
        ``if`` or of a conditional expression (``nullcontext()`` on the other): the region
        opened again at this item."""
        name = dotted(expr.func if expr.__class__ is cst.Call else expr)
        if name is None or self.frame is None:
            return None
        top, path = getattr(self.ctx, "statement_index", 0), tuple(self._path)
        made = self.context_functions.get(name) if expr.__class__ is cst.Call else None
        if made is not None:  # with maybe_autocast():
            region = made.region.opened_at(expr, top, path, "expr" if made.maybe_off else None)
            return region
        found = self.self_contexts.get(name) if name.startswith("self.") else next(
            (f.contexts[name] for f in self.frame.chain() if name in f.contexts), None
        )
        if found is None:
            return None
        return found[0].opened(expr, self.ctx, top, path)

    def _bind_context(self, name: str, value: cst.BaseExpression) -> None:
        """Track names bound to autocast (:meth:`_bound_region`). A later binding to something
        else replaces it when it runs wherever the autocast binding did (same arm or an
        enclosing one); on another arm (``else: ctx = nullcontext()``) it is kept, as a region
        that may be off."""
        contexts = self.self_contexts if name.startswith("self.") else self.frame.contexts
        kind = value.__class__
        bound = bound_context(value, self.ctx) if kind in _MAY_OPEN else None
        if bound is None and kind is cst.Call:
            made = self.context_functions.get(dotted(value.func) or "")
            bound = BoundContext(made.region, maybe_off=made.maybe_off) if made is not None else None
        path = tuple(self._path)
        if bound is not None:
            contexts[name] = (bound, path)
            return
        held = contexts.get(name)
        if held is not None:
            if held[1][: len(path)] == path:
                del contexts[name]
            else:
                held[0].maybe_off = True

    def current_region(self) -> Region | None:
        """The innermost open autocast region if it is enabled (``None`` under a nested
        ``autocast(enabled=False)``)."""
        stack = self.frame.stack if self.frame else None
        if stack and stack[-1].active:
            return stack[-1]
        return None

    # -- bindings -----------------------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, node.value)

    def visit_Param(self, node: cst.Param) -> None:
        if self.frame is not None and "scaler" in node.name.value.lower():
            self.frame.scalers.add(node.name.value)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        name = dotted(target)
        if name is None or self.frame is None:
            return
        frame = self.frame
        for kind, names, self_names in (
            ("scaler", frame.scalers, self.self_scalers),
            ("optimizer", frame.optimizers, self.self_optimizers),
        ):
            if self._builds(value, kind):
                (self_names if name.startswith("self.") else names).add(name)
                if kind == "scaler" and not name.startswith("self."):
                    frame.built.setdefault(name, (self._next(), tuple(self._loops)))
        if self.is_module(value):
            frame.modules.add(name)
        else:
            frame.modules.discard(name)
        comp = value.elt if value.__class__ in (cst.SetComp, cst.ListComp, cst.GeneratorExp) else None
        if self.scale_call(value) is not None or (comp is not None and self.scale_call(comp) is not None):
            frame.scaled_names.add(name)  # (also {scaler.scale(v) for v in losses}: each item is scaled)
        else:
            frame.scaled_names.discard(name)
        self._bind_context(name, value)

    def _builds(self, value: cst.BaseExpression, kind: str) -> bool:
        kind_of = value.__class__
        if kind_of is cst.IfExp:
            return self._builds(value.body, kind) or self._builds(value.orelse, kind)
        if kind_of is not cst.Call:
            return False
        name = self.ctx.resolve(value.func) or ""
        if kind == "scaler":
            return name in GRAD_SCALERS
        return name.startswith("torch.optim.") and "lr_scheduler" not in name and name[12:13].isupper()

    # -- what an expression is ----------------------------------------------------------------
    def is_scaler(self, expr: cst.BaseExpression) -> str | None:
        """The dotted name of ``expr`` if it is a GradScaler we know of: bound to
        ``GradScaler(...)`` (locally, in an enclosing frame, or as a ``self.`` attribute), or
        named like one (a parameter or attribute whose name contains ``scaler``)."""
        name = dotted(expr)
        if name is None:
            return None
        if "scaler" in name.rsplit(".", 1)[-1].lower() or name in self.self_scalers:
            return name
        if self.frame is not None and any(name in f.scalers for f in self.frame.chain()):
            return name
        return None

    def is_optimizer(self, name: str) -> bool:
        last = name.rsplit(".", 1)[-1].lower()
        if "sched" in last or "scaler" in last:
            return False
        if name in self.self_optimizers or any(name in f.optimizers for f in self.frame.chain()):
            return True
        return bool(_OPTIMIZER.search(last))

    def is_module(self, expr: cst.BaseExpression) -> bool:
        """An ``nn.Module``: a constructor of ``torch.nn`` or of a module class of this file, a
        name bound to one, or a name like ``model``/``net`` (through ``.to(...)`` chains)."""
        expr = strip_module_methods(expr)
        if expr.__class__ is cst.Call:
            return is_module_constructor(expr, self.ctx, self.module_classes)
        name = dotted(expr)
        if name is None:
            return False
        if self.frame is not None and any(name in f.modules for f in self.frame.chain()):
            return True
        return bool(_MODULE_NAME.search(name.rsplit(".", 1)[-1].lower()))

    def scale_call(self, expr: cst.BaseExpression) -> str | None:
        """The scaler's name if ``expr`` is ``scaler.scale(...)`` (also inside ``typing.cast``)."""
        if expr.__class__ is cst.Call and dotted(expr.func) in ("cast", "typing.cast") and len(expr.args) == 2:
            expr = expr.args[1].value
        if (
            expr.__class__ is cst.Call
            and expr.func.__class__ is cst.Attribute
            and expr.func.attr.value == "scale"
            and expr.args
        ):
            return self.is_scaler(expr.func.value)
        return None

    def _scaled(self, expr: cst.BaseExpression) -> bool:
        if expr.__class__ is cst.Call and expr.func.__class__ is cst.Attribute and expr.func.attr.value == "scale" and expr.args:
            return True  # <anything>.scale(loss).backward()
        name = dotted(expr)
        return name is not None and any(name in f.scaled_names for f in self.frame.chain())

    # -- events -------------------------------------------------------------------------------
    def _next(self) -> int:
        self._order += 1
        return self._order

    def _add(self, kind: str, node: cst.CSTNode, **extra) -> Event:
        top = getattr(self.ctx, "statement_index", 0)
        event = Event(kind, node, self._next(), tuple(self._path), tuple(self._loops), top=top, **extra)
        self.frame.events.append(event)
        return event

    def visit_Call(self, node: cst.Call) -> None:
        if self.frame is None:
            return
        func = node.func
        name = self.ctx.resolve(func)
        if name in CLIPS:
            self._add("clip", node)
            return
        if name == "torch.autograd.backward":
            first = node.args[0].value if node.args else None
            self._add("backward", node, scaled=first is not None and self._scaled(first), region=self.current_region())
            return
        if func.__class__ is not cst.Attribute:
            return
        method, receiver = func.attr.value, func.value
        if method == "backward":
            owner = dotted(receiver)
            if owner is not None and owner.rsplit(".", 1)[-1] in _NOT_TENSORS:
                return
            if receiver.__class__ is cst.Call and receiver.func.__class__ is cst.Name and receiver.func.value == "super":
                return
            if owner is not None and node.args and self.is_optimizer(owner):
                # optimizer.backward(loss): an fp16/AMP optimizer wrapper (fairseq, apex) scales itself
                self._add("backward", node, scaled=True, region=self.current_region())
                return
            self._add("backward", node, scaled=self._scaled(receiver), region=self.current_region())
            return
        if method == "half" or (method == "to" and any(self.dtype(a.value) == "float16" for a in node.args)):
            if self.is_module(receiver):
                self._add("half", node)
            return
        if method == "zero_grad":
            owner = dotted(receiver)
            if owner is not None and self.is_optimizer(owner):
                self._add("zero_grad", node, target=owner)
            return
        if method not in ("scale", "unscale_", "step", "update"):
            return
        scaler = self.is_scaler(receiver)
        first = node.args[0].value if node.args else None
        if scaler is not None:
            if method == "scale" and first is not None:
                self._add("scale", node, scaler=scaler)
            elif method == "unscale_":
                self._add("unscale", node, scaler=scaler, target=dotted(first) if first is not None else None)
            elif method == "step" and first is not None:
                self._add("step", node, scaler=scaler, target=dotted(first))
            elif method == "update":
                self._add("update", node, scaler=scaler)
            return
        if method == "step" and not any(a.keyword is None and not isinstance(a.value, (cst.Lambda, cst.Name)) for a in node.args):
            owner = dotted(receiver)
            if owner is not None and self.is_optimizer(owner):
                self._add("opt_step", node, target=owner)


def casts_to_bfloat16(node: cst.Call, amp: AmpAnalysis) -> bool:
    """``x.bfloat16()``, ``x.to(torch.bfloat16)``, ``x.to(dtype=torch.bfloat16)`` (receiver not checked)."""
    func = node.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "bfloat16":
        return not node.args
    return func.attr.value == "to" and any(
        amp.dtype(a.value) == "bfloat16" for a in node.args if a.keyword is None or a.keyword.value == "dtype"
    )


class FrameRule(Rule):
    """A rule that judges each frame once the traversal has left it: subclasses implement
    :meth:`check`, called with every closed :class:`Frame` (functions, then the module)."""

    requires = (AmpAnalysis,)

    @property
    def amp(self) -> AmpAnalysis:
        return self.ctx.analysis(AmpAnalysis)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.check(self.amp.closed)

    def leave_Module(self, node: cst.Module) -> None:
        self.check(self.amp.closed)

    def check(self, frame: Frame) -> None:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    # -- for autofixes: the statement an event's call is ---------------------------------------
    def statement_of(self, call: cst.CSTNode):
        """(small statement, its line) of an event's call, or ``None`` (see
        :meth:`AmpAnalysis.visit_SimpleStatementLine`)."""
        return self.amp.statements.get(id(call))

    def report_at(self, item: "Event | Region | Site", message: str | None = None, fix=None) -> None:
        """Report at an event or region recorded earlier in the traversal. The engine files a
        report under the top-level statement being visited, which, once a frame closes, is
        no longer the one holding the node: the one recorded with the item is restored."""
        ctx = self.ctx
        saved = getattr(ctx, "statement_index", None)
        ctx.statement_index = item.top
        try:
            self.report(item.node, message, fix)
        finally:
            if saved is None:
                del ctx.statement_index
            else:
                ctx.statement_index = saved
