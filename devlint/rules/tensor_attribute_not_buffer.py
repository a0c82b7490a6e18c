"""DEV113: a plain tensor attribute of a module, which ``module.to(device)`` does not move."""

from __future__ import annotations

import ast

import libcst as cst

from ..dataflow import CPU, DeviceFlow
from ..expression_kinds import _one_dimensional
from ..precheck import CpuFlow, methods_of, nodes_under
from ..rule import Rule

_SHAPE_ONLY = frozenset({"shape", "device", "dtype", "ndim", "size", "dim", "numel", "is_cuda"})
_MOVES = frozenset({"to", "cuda", "type_as"})
_CUSTOM_MOVE = frozenset({"_apply", "to", "cuda", "_load_from_state_dict"})


class _ClassState:
    __slots__ = ("info", "candidates", "reads", "handled", "excluded", "inherited", "read_at", "assigned", "one_d", "by_method",
                 "one_d_locals")

    def __init__(self, info, inherited=None) -> None:
        self.info = info
        self.candidates: dict[str, cst.CSTNode] = {}
        self.reads: set[str] = set()
        self.handled: set[str] = set()
        self.excluded: set[int] = set()
        #: (plain tensors set by, attributes read by the forward of, the project base classes
        #: in other files, the first base's name), from :mod:`devlint.project`; or None
        self.inherited = inherited
        self.read_at: dict[str, cst.CSTNode] = {}  # first read in forward of an inherited tensor
        self.assigned: set[str] = set()  # attributes this class's __init__ sets or registers
        self.one_d: set[str] = set()  # candidates made by a 1-D factory (torch.linspace(a, b, n)), or sliced from one
        self.one_d_locals: set[str] = set()  # locals of __init__ bound to a 1-D factory result
        #: candidates set from a method of the class (``self.codes = self.one_hot(n)``), by the
        #: method's name: kept at the end only when every ``return`` of that method is a CPU tensor
        self.by_method: dict[str, str] = {}


def _inherited(ctx, node: cst.ClassDef):
    """What the project base classes of ``node`` defined in other files set and read (see
    :attr:`_ClassState.inherited`); ``None`` when it has none or one overrides ``_apply``/``to``."""
    project = ctx.project
    if project is None:
        return None
    tensors, reads, methods, first = set(), set(), set(), None
    for file, name in project.base_classes(node.bases, ctx.names):
        t, r, m, _ = project.inherited(file, name)
        info = project.class_info(file, name) or {}
        tensors |= t | set(info.get("tensors", ()))
        reads |= r | set(info.get("reads", ()))
        methods |= m | set(info.get("methods", ()))
        first = first or name
    if first is None or methods & _CUSTOM_MOVE:
        return None
    return tensors, reads, first


class TensorAttributeNotBuffer(Rule):
    """A tensor kept as a plain attribute of a module stays behind when the module moves."""

    code = "DEV113"
    name = "tensor-attribute-not-buffer"
    message = "plain tensor attribute read in forward: register it with register_buffer"
    triggers = ("forward",)
    requires = (DeviceFlow,)

    what_it_does = """
In `__init__` of an `nn.Module` subclass, flags `self.name = <tensor>` where the tensor is a
factory call, `torch.tensor([...])`, `torch.from_numpy(...)` or the result of a function of the
same module, or of a method of the class (`self.codes = self.one_hot(n)`), whose every `return`
is such a tensor, when `forward` reads `self.name` (also after reshaping it in place:
`self.codes = self.codes.permute(2, 0, 1)`). The tensor
may be built in a local first and filled by slice assignments (`pe = torch.zeros(n, d);
pe[:, 0::2] = ...; self.pe = pe`, the positional-encoding idiom): writing into a tensor keeps
it where it was made. The legacy constructors (`torch.Tensor([...])`, `torch.FloatTensor(n)`)
are factories too.
`nn.Parameter(...)`, `self.register_buffer(...)`, non-tensor attributes, tensors used only in
`__init__`, reads in `forward` that only ask for the shape or move the tensor
(`self.name.to(x.device)`), and classes that override `_apply`/`to` are left alone.

Across files (through the project index): a subclass of a module class of another file of the
project is a module too; its `__init__` is flagged when it sets a plain tensor that the base
class's `forward` reads, and its `forward` is flagged where it reads a plain tensor that the
base class's `__init__` sets (the assignment is in the other file)."""
    why_bad = """
`module.to(device)` moves parameters and registered buffers, not plain attributes: after
`model.to("cuda")` the attribute is still on the CPU and `forward` raises `RuntimeError:
Expected all tensors to be on the same device`. The tensor is also missing from the
`state_dict`."""
    flagged = (
        '''class Normalize(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = torch.tensor([0.485, 0.456, 0.406])  # expect: DEV113

    def forward(self, x):
        return x - self.mean[None, :, None, None]
''',
        '''class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(max_len).unsqueeze(1)
        pe[:, 0::2] = torch.sin(position)
        pe[:, 1::2] = torch.cos(position)
        self.pe = pe  # expect: DEV113

    def forward(self, x):
        return x + self.pe[: x.size(0)]
''',
        '''class Diffusion(nn.Module):
    def __init__(self, steps=1000):
        super().__init__()
        self.alphas = torch.linspace(0.9999, 0.98, steps)  # expect: DEV113

    def forward(self, x, t):
        return x * self.alphas[t].sqrt()[:, None]
''',
    )
    clean = (
        '''class Normalize(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]))
        self.scale = nn.Parameter(torch.ones(3))
        self.table = torch.arange(10)

    def forward(self, x):
        n = self.table.shape[0]
        return (x - self.mean[None, :, None, None]) * self.scale[None, :, None, None] / n


class ScheduledLoss(nn.Module):
    def __init__(self, epochs=30):
        super().__init__()
        self.temperatures = torch.linspace(0.04, 0.07, epochs)

    def forward(self, logits, epoch: int):
        return (logits / self.temperatures[epoch]).softmax(-1)  # one element: a 0-dim tensor
''',
    )
    fix_safety = "This rule has no autofix: `persistent=False` or not is the author's choice."

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a class whose ``__init__`` assigns ``self.<x> = <value>`` (a plain target)
        where ``<value>`` may be a CPU tensor (:class:`devlint.precheck.CpuFlow`) or is a call of
        one of the class's methods (``<name>.<method>(...)``), and whose ``forward`` reads some
        ``<name>.<x>`` of the same ``x``: the rule reports only such an assignment, of a value
        whose kind is ``CPU`` in ``__init__`` or returned as one by every ``return`` of that
        method, and only when ``forward`` reads the attribute."""
        for cls in facts.classes:
            inits, forwards = methods_of(cls, "__init__"), methods_of(cls, "forward")
            if not inits or not forwards:
                continue
            read = {
                node.attr
                for forward in forwards for node in nodes_under(forward, facts)
                if node.__class__ is ast.Attribute and node.value.__class__ is ast.Name
            }
            flow = None
            for init in inits:
                for node in nodes_under(init, facts):
                    if node.__class__ is ast.Assign and any(
                        t.__class__ is ast.Attribute and t.value.__class__ is ast.Name and t.attr in read for t in node.targets
                    ):
                        if _calls_own_method(node.value, cls):
                            return True
                        flow = flow or CpuFlow(facts, cls)
                        if not flow.not_cpu(node.value, init):
                            return True
        return False

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._classes: list[_ClassState | None] = []

    def _state(self, method: str) -> _ClassState | None:
        flow = self.ctx.analysis(DeviceFlow)
        if not self._classes or self._classes[-1] is None:
            return None
        state = self._classes[-1]
        frame = flow.frame
        if frame.cls is not state.info or frame.name != method or frame.self_name is None:
            return None
        return state

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        info = self.ctx.analysis(DeviceFlow).classes[-1]
        ok = info.is_module and not (info.methods & _CUSTOM_MOVE)
        self._classes.append(_ClassState(info, _inherited(self.ctx, node)) if ok else None)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        state = self._classes.pop()
        if state is None:
            return
        cpu_methods = self.ctx.analysis(DeviceFlow).cpu_methods.get(id(state.info), set())
        for name, method in state.by_method.items():
            if method not in cpu_methods:
                state.candidates.pop(name, None)  # a method that may return a placed tensor or a module
        for name, where in state.candidates.items():
            if name in state.reads and name not in state.handled:
                self.report(where)
        if state.inherited is not None:
            self._across_files(state)

    def _across_files(self, state: _ClassState) -> None:
        """A base class in another file: its ``forward`` reads a plain tensor this
        ``__init__`` sets (reported on the assignment), or this ``forward`` reads a plain
        tensor its ``__init__`` sets (reported on the read: the assignment is in that file)."""
        tensors, reads, base = state.inherited
        for name, where in state.candidates.items():
            if name in reads and name not in state.reads and name not in state.handled and "forward" not in state.info.methods:
                self.report(where)
        for name, where in state.read_at.items():
            if name in tensors and name not in state.assigned and name not in state.handled:
                self.report(where, f"self.{name}: plain tensor of {base}, .to(device) skips it: make it a buffer")

    def visit_Assign(self, node: cst.Assign) -> None:
        flow = self.ctx.analysis(DeviceFlow)
        state = self._state("__init__")
        if state is not None:
            v = flow.value(node.value)
            for target in node.targets:
                t = target.target
                if t.__class__ is cst.Attribute and flow.is_self(t.value):
                    name = t.attr.value
                    state.assigned.add(name)
                    method = _own_method(flow, state, node.value)
                    if v is not None and v.kind == CPU and not v.explicit and not v.module:
                        state.candidates[name] = node
                        state.by_method.pop(name, None)
                        if _one_d(node.value, state.one_d_locals):
                            state.one_d.add(name)
                    elif method is not None:
                        state.candidates[name] = node
                        state.by_method[name] = method
                    elif not (name in state.candidates and _reshaped(flow, node.value, name)):
                        state.candidates.pop(name, None)  # (self.codes.permute(2, 0, 1) of a candidate: kept)
                elif t.__class__ is cst.Name:
                    if _one_d(node.value, state.one_d_locals):
                        state.one_d_locals.add(t.value)
                    else:
                        state.one_d_locals.discard(t.value)
            return
        state = self._state("forward")
        if state is not None:
            for target in node.targets:
                t = target.target
                if t.__class__ is cst.Attribute and flow.is_self(t.value):
                    state.handled.add(t.attr.value)
                    state.excluded.add(id(t))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if func.__class__ is not cst.Attribute:
            return
        flow = self.ctx.analysis(DeviceFlow)
        state = self._state("__init__")
        if state is not None and func.attr.value in ("register_buffer", "register_parameter") and flow.is_self(func.value):
            if node.args and node.args[0].value.__class__ is cst.SimpleString:
                state.candidates.pop(node.args[0].value.evaluated_value, None)
                state.assigned.add(node.args[0].value.evaluated_value)
            return
        state = self._state("forward")
        if state is not None and func.value.__class__ is cst.Attribute and flow.is_self(func.value.value):
            if func.attr.value in _MOVES:
                state.handled.add(func.value.attr.value)
            if func.attr.value in _MOVES or func.attr.value in _SHAPE_ONLY:
                state.excluded.add(id(func.value))

    def visit_For(self, node: cst.For) -> None:
        self._iterated(node.iter)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._iterated(node.iter)

    def _iterated(self, expr: cst.BaseExpression) -> None:
        """``for b in self.bins`` (also through ``zip``/``enumerate``/``reversed``) in ``forward``,
        of a 1-D tensor attribute: each element is a 0-dim tensor, which CUDA kernels accept
        beside device tensors (the expected-calibration-error loop over ``torch.linspace`` bin
        edges)."""
        state = self._state("forward")
        if state is None:
            return
        flow = self.ctx.analysis(DeviceFlow)
        items = [expr]
        if expr.__class__ is cst.Call and expr.func.__class__ is cst.Name and \
                expr.func.value in ("zip", "enumerate", "reversed") and not self.ctx.resolve(expr.func):
            items = [a.value for a in expr.args if not a.star]
        for item in items:
            if item.__class__ is cst.Attribute and flow.is_self(item.value) and item.attr.value in state.one_d:
                state.excluded.add(id(item))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """``self.schedule[epoch]`` of a 1-D factory result with an integer (a literal, or a
        ``forward`` parameter annotated ``int``): one element, a 0-dim tensor, which CUDA kernels
        accept beside device tensors. Not ``self.alphas[t]`` with ``t`` a tensor of steps."""
        state = self._state("forward")
        inner = node.value
        if state is None or inner.__class__ is not cst.Attribute or inner.attr.value not in state.one_d:
            return
        if len(node.slice) != 1 or node.slice[0].slice.__class__ is not cst.Index:
            return
        index = node.slice[0].slice.value
        flow = self.ctx.analysis(DeviceFlow)
        if (index.__class__ is cst.Integer or (index.__class__ is cst.Name and _int_param(flow.frame.node, index.value))) and (
                flow.is_self(inner.value)):
            state.excluded.add(id(inner))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        state = self._state("forward")
        if state is None:
            return
        flow = self.ctx.analysis(DeviceFlow)
        inner = node.value
        if node.attr.value in _SHAPE_ONLY and inner.__class__ is cst.Attribute and flow.is_self(inner.value):
            state.excluded.add(id(inner))
        if flow.is_self(inner) and id(node) not in state.excluded and node.attr.value in state.candidates:
            state.reads.add(node.attr.value)
        if state.inherited is not None and flow.is_self(inner) and id(node) not in state.excluded:
            state.read_at.setdefault(node.attr.value, node)


def _one_d(value: cst.BaseExpression, locals_1d: set[str]) -> bool:
    """A 1-D tensor: a 1-D factory call (:func:`_one_dimensional`), or a slice
    (``edges[:-1]``, ``edges[1:]``) of one or of a local bound to one."""
    if value.__class__ is cst.Call:
        return _one_dimensional(value)
    if value.__class__ is cst.Subscript and len(value.slice) == 1 and value.slice[0].slice.__class__ is cst.Slice:
        inner = value.value
        return (inner.__class__ is cst.Name and inner.value in locals_1d) or \
            (inner.__class__ is cst.Call and _one_dimensional(inner))
    return False


def _calls_own_method(value: ast.AST, cls: ast.ClassDef) -> bool:
    """Pre-check: is ``value`` ``<name>.<m>(...)`` with ``m`` a method defined in ``cls``?"""
    if value.__class__ is not ast.Call or value.func.__class__ is not ast.Attribute or value.func.value.__class__ is not ast.Name:
        return False
    return bool(methods_of(cls, value.func.attr))


def _own_method(flow: DeviceFlow, state: _ClassState, value: cst.BaseExpression) -> str | None:
    """``m`` when ``value`` is ``self.m(...)``, a method of this class (not ``to``/``cuda``)."""
    if value.__class__ is not cst.Call or value.func.__class__ is not cst.Attribute:
        return None
    func = value.func
    name = func.attr.value
    return name if flow.is_self(func.value) and name in state.info.methods and name not in _CUSTOM_MOVE else None


def _reshaped(flow: DeviceFlow, value: cst.BaseExpression, name: str) -> bool:
    """Is ``value`` the attribute ``self.<name>`` itself, indexed or through methods that keep
    its device (``self.codes.permute(2, 0, 1)``, ``self.pe[:n].unsqueeze(0)``), never moved?"""
    while True:
        t = value.__class__
        if t is cst.Subscript:
            value = value.value
        elif t is cst.Call and value.func.__class__ is cst.Attribute and value.func.attr.value not in _MOVES:
            value = value.func.value
        else:
            break
    return value.__class__ is cst.Attribute and value.attr.value == name and flow.is_self(value.value)


def _int_param(function: cst.CSTNode, name: str) -> bool:
    """Is ``name`` a parameter of ``function`` annotated as an integer (``int``,
    ``Optional[int]``, ``int | None``)?"""
    params = getattr(function, "params", None)
    if params is None:
        return False
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name and param.annotation is not None:
            text = cst.Module([]).code_for_node(param.annotation.annotation).replace(" ", "")
            return text in ("int", "Optional[int]", "int|None", "None|int")
    return False

