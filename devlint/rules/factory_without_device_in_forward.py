"""DEV112: a tensor factory without ``device=`` inside ``forward``."""

from __future__ import annotations

import ast

import libcst as cst

from ..dataflow import CPU, DEV, FACTORIES, INP, LEGACY_CONSTRUCTORS, DeviceFlow
from ..guards import string_value
from ..names import dotted
from ..precheck import methods_of, nodes_under, resolves_to
from ..rule import Rule

#: The calls the dataflow records as a CPU tensor's ``origins`` (the nodes this rule reports).
_ORIGINS = frozenset(f"torch.{name}" for name in (*FACTORIES, "tensor", "as_tensor", *LEGACY_CONSTRUCTORS))

#: Tensor methods that read a shape or a number, not the tensor's data.
_SHAPE_METHODS = frozenset({"size", "dim", "numel", "nelement", "ndimension", "stride", "item", "tolist", "get_device"})

#: Samplers whose tensor arguments set the result's device (``torch.normal(0, std)``).
_SAMPLERS = frozenset({"torch.normal", "torch.poisson", "torch.bernoulli", "torch.multinomial"})

#: Tensor methods whose tensor arguments may sit on another device (or are shapes).
_CROSS_DEVICE_OK = frozenset({"to", "copy_", "type_as", "expand", "view", "reshape", "repeat", "permute", "index_put_", "new_tensor"})


class FactoryWithoutDeviceInForward(Rule):
    """A tensor created in `forward` without `device=` meets the module's inputs or parameters."""

    code = "DEV112"
    name = "factory-without-device-in-forward"
    message = "forward makes a tensor without device=: pass device=x.device"
    triggers = ("forward", "device")
    requires = (DeviceFlow,)
    #: outside ``forward``: a factory without a device meets a tensor made on one in that function
    placed_message = "tensor made without device= meets one on a device: pass device="

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a call that may be ``torch.zeros/tensor/FloatTensor/...`` without a
        ``device=`` keyword inside a ``def forward`` of a class, or inside any ``def`` that also
        passes ``device=`` (other than a ``"cpu"`` literal) to some call. Such a call is the
        only origin of what this rule reports (``DeviceFlow`` keeps origins only on the factory
        results of the frame being walked: outer frames lend no tensors, ``self.`` attributes
        read in ``forward`` are inputs, a helper's summary has no origins); ``forward`` meets
        inputs, a module-level function that a ``forward`` calls by name the inputs handed to it,
        another function only the tensors it places with ``device=`` itself."""
        called = set()
        for cls in facts.classes:
            for forward in methods_of(cls, "forward"):
                if _unplaced_factory(forward, facts):
                    return True
                called.update(n.func.id for n in nodes_under(forward, facts) if n.__class__ is ast.Call and n.func.__class__ is ast.Name)
        for node in facts.tree.body:  # a module-level helper that forward calls
            if node.__class__ is ast.FunctionDef and node.name in called and _unplaced_factory(node, facts):
                return True
        if "device" not in facts.keywords:
            return False
        for node in ast.walk(facts.tree):
            if (node.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef) and node.name != "forward"
                    and _places(node, facts) and _unplaced_factory(node, facts)):
                return True
        return False

    what_it_does = """
Inside `forward` of an `nn.Module` subclass (loss modules included), flags
`torch.zeros/ones/empty/full/arange/randn/rand/randint/eye/linspace(...)` and
`torch.tensor([...])` called without `device=` whose result meets the module's inputs or
parameters: an operand of arithmetic or a comparison with an input (also after arithmetic with
a number, or with a number the class holds on `self`, as `torch.rand(n) > self.p`), an argument of a submodule
call (`self.rnn(x, (h0, c0))`), of a torch function together with an input (`torch.cat`), or of a
method of an input. `*_like`, `x.new_*`, `device=x.device`, registered buffers, 0-dim scalars
such as `torch.tensor(2.0)`, results used only for shapes or indexing, and factories moved at
once (`torch.arange(n).to(x.device)`) are left alone.

Outside `forward`, in any function that places a tensor itself (`device=query.device`,
`device=device`; not `device="cpu"`), the same meetings are flagged with a tensor it placed or
with a parameter whose `.device` it passes: a mask helper that makes its bias on
`query.device` and its causal mask with a bare `torch.ones(...)`, an `init_hidden` that adds
`torch.rand(...)` to a state made with `device=device`. So is a module-level function that a
`forward` of the same file hands one of its inputs (`fourier(x, self.sigma, self.m)`): that
parameter is on the module's device, and `torch.arange(m)` meeting it (also through
`scale ** (j / m)` with `scale: float`, `m: int` annotated, and `math.pi`) is flagged. Any other
function that places nothing is left alone: its factories may be meant for the CPU. So are meetings in `torch.nn.functional` calls
(`F.mse_loss(pred, torch.tensor(...))`) and with tensors placed by another method
(`self.anchor`): DEV111 reports those where they are fed to a model or a loss."""
    why_bad = """
A factory without `device=` allocates on the CPU. Once the module is moved to a GPU its inputs
and parameters are there, and combining them with the new tensor raises `RuntimeError: Expected
all tensors to be on the same device` — on the GPU box only; on a laptop CPU everything agrees."""
    flagged = (
        '''class SeqModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 8, batch_first=True)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), 8)  # expect: DEV112
        out, _ = self.rnn(x, h0)
        return out
''',
        '''class AddPosition(nn.Module):
    def forward(self, x):
        pos = torch.arange(x.size(1))  # expect: DEV112
        return x + pos[None, :, None]
''',
        '''def causal_bias(query, key):
    bias = torch.zeros(query.size(-2), key.size(-2), device=query.device)
    keep = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool).tril()  # expect: DEV112
    return bias.masked_fill(~keep, float("-inf"))
''',
    )
    clean = (
        '''class SeqModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 8, batch_first=True)

    def forward(self, x):
        h0 = x.new_zeros(1, x.size(0), 8)
        pos = torch.arange(x.size(1), device=x.device)
        scale = torch.tensor(2.0)
        idx = torch.arange(x.size(0))
        out, _ = self.rnn(x[idx] * scale, h0)
        return out + pos[None, :, None] + torch.zeros(8).to(x.device)


def causal_bias(query, key):
    bias = torch.zeros(query.size(-2), key.size(-2), device=query.device)
    keep = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool, device=query.device).tril()
    return bias.masked_fill(~keep, float("-inf"))
''',
    )
    fix_safety = "This rule has no autofix: `device=x.device` needs an input in reach, which the author picks."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._done: set[int] = set()
        #: per enclosing ``def``: the names ``P`` it passes as ``device=P.device`` (tensors on a
        #: device), and the ids of its own calls given a ``device=`` other than a "cpu" literal
        self._device_params: list[tuple[frozenset[str], frozenset[int]]] = []
        #: module-level function -> its parameters some ``forward`` of this file hands an input
        self._fed: dict[str, frozenset[str]] = {}

    def visit_Module(self, node: cst.Module) -> None:
        self._fed = _fed_by_forward(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params, calls = _device_sources(node)
        if not self._device_params and node.name.value in self._fed:  # a module-level helper forward hands inputs
            params |= self._fed[node.name.value]
        self._device_params.append((params, calls))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._device_params.pop()

    def _flow(self) -> DeviceFlow | None:
        """The dataflow, in a function (``forward`` or another ``def``); ``None`` elsewhere."""
        flow = self.ctx.analysis(DeviceFlow)
        return flow if flow.frame.kind == "function" else None

    def _placed(self, flow: DeviceFlow, v, expr: cst.BaseExpression | None = None) -> bool:
        """Is ``v`` (the value of ``expr``) on the module's device: an input of ``forward``, a
        tensor this function made with ``device=`` (not the CPU: ``torch.zeros(n,
        device=query.device)``), or read from a name whose ``.device`` it passes as ``device=``?"""
        if v is not None and not v.module and v.kind == INP:
            return True
        if not self._device_params:
            return False
        params, calls = self._device_params[-1]
        # made here: a tensor another method placed (self.anchor) meets a loss, DEV111's case
        if v is not None and not v.module and v.kind == DEV and any(id(o) in calls for o in v.origins):
            return True
        return expr is not None and _root_name(expr) in params

    def _report(self, flow: DeviceFlow, v) -> None:
        for origin in v.origins:
            if (self.ctx.resolve(origin.func) or "") in _SAMPLERS and any(
                    not isinstance(a.value, (cst.Integer, cst.Float, cst.UnaryOperation, cst.Tuple, cst.List)) for a in origin.args):
                continue  # torch.normal(0, std) draws on std's device
            if id(origin) not in self._done:
                self._done.add(id(origin))
                self.report(origin, None if flow.frame.forward else self.placed_message)

    def _pair(self, flow: DeviceFlow, operands) -> None:
        values = [flow.value(o) for o in operands]
        if not any(self._placed(flow, v, o) for v, o in zip(values, operands)):
            return
        for v in values:
            if v is not None and v.kind == CPU and v.origins and not v.explicit:
                self._report(flow, v)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        flow = self._flow()
        if flow is not None:
            self._pair(flow, (node.left, node.right))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        flow = self._flow()
        if flow is not None:
            self._pair(flow, (node.left, *(c.comparator for c in node.comparisons)))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        flow = self._flow()
        if flow is not None:
            self._pair(flow, (node.target, node.value))

    def visit_Call(self, node: cst.Call) -> None:
        flow = self._flow()
        if flow is None:
            return
        args = []
        for arg in node.args:
            value = arg.value
            if isinstance(value, (cst.Tuple, cst.List)):
                args.extend(e.value for e in value.elements)
            else:
                args.append(value)
        values = [flow.value(a) for a in args]
        cpu = [v for v in values if v is not None and v.kind == CPU and v.origins and not v.explicit]
        if not cpu:
            return
        func, meets = node.func, False
        if "ctc" in (dotted(func) or "").lower():
            return  # CTC losses take their targets and lengths on the CPU
        if any(a.keyword is not None and a.keyword.value == "device" for a in node.args):
            return  # torch.sparse_coo_tensor(i, v, device=d), torch.tensor(t, device=d): copied there
        has_input = any(self._placed(flow, v, a) for v, a in zip(values, args))
        if isinstance(func, cst.Attribute) and flow.is_self(func.value) and flow.frame.forward:
            cls = flow.cls
            meets = cls is not None and func.attr.value in cls.torch_modules  # a custom submodule may move its inputs
        elif isinstance(func, cst.Attribute) and not (self.ctx.resolve(func) or "").startswith("torch."):
            method = func.attr.value
            receiver = flow.value(func.value)
            meets = self._placed(flow, receiver, func.value) and method not in _CROSS_DEVICE_OK and not method.startswith("new_")
        elif (self.ctx.resolve(func) or "").startswith("torch."):
            # outside forward, F.mse_loss(pred, torch.tensor(...)) and the like are DEV111's
            meets = has_input and (flow.frame.forward or not self.ctx.resolve(func).startswith("torch.nn.functional."))
        if meets:
            for v in cpu:
                self._report(flow, v)


def _device_sources(function: cst.FunctionDef) -> tuple[frozenset[str], frozenset[int]]:
    """The parameters ``P`` of ``function`` (not ``self``/``cls``) that it passes as
    ``device=P.device`` (tensors the caller hands in on a device), and the ids of the calls it
    gives a ``device=`` other than a ``"cpu"`` literal (nested ``def`` s aside)."""
    params = function.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)} - {"self", "cls"}
    found, calls, stack = set(), set(), list(function.body.children)
    while stack:
        node = stack.pop()
        t = node.__class__
        if t is cst.FunctionDef or t is cst.ClassDef or t is cst.Lambda:
            continue
        if t is cst.Call:
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "device" and not (string_value(arg.value) or "").startswith("cpu"):
                    calls.add(id(node))
                    value = arg.value
                    if (value.__class__ is cst.Attribute and value.attr.value == "device" and value.value.__class__ is cst.Name
                            and value.value.value in names):
                        found.add(value.value.value)
        stack.extend(node.children)
    return frozenset(found), frozenset(calls)


def _root_name(expr: cst.BaseExpression) -> str | None:
    """``x`` of ``x``, ``x[:, None]``, ``x.float()``, ``x.view(n, 1)``, ``torch.unsqueeze(x, -1)``;
    ``None`` otherwise (also for ``x.size()`` and other reads of a shape or a number, and for a
    factory's argument: ``torch.tensor(x)`` is a copy on the CPU)."""
    while True:
        t = expr.__class__
        if t is cst.Name:
            return expr.value
        if t is cst.Subscript:
            expr = expr.value
        elif t is cst.Call and _torch_op(expr):
            expr = expr.args[0].value
        elif t is cst.Call and expr.func.__class__ is cst.Attribute and expr.func.attr.value not in _SHAPE_METHODS:
            expr = expr.func.value
        else:
            return None


def _torch_op(call: cst.Call) -> bool:
    """``torch.unsqueeze(x, -1)``, ``torch.flatten(x, 1)``: a ``torch.<op>`` (spelled so, not a
    factory nor a copy) whose first positional argument is the tensor it works on."""
    name = dotted(call.func) or ""
    return (name.startswith("torch.") and name.count(".") == 1 and f"torch.{name[6:]}" not in _ORIGINS
            and name[6:] not in ("from_numpy", "as_tensor", "tensor") and bool(call.args) and call.args[0].keyword is None
            and not call.args[0].star)


def _may_be_input(param: cst.Param) -> bool:
    """A ``forward`` parameter that may be a tensor: no default but ``None``, no annotation but
    one naming a ``Tensor`` (``scale=1.0``, ``steps: int`` are numbers)."""
    default = param.default
    if default is not None and not (default.__class__ is cst.Name and default.value == "None"):
        return False
    return param.annotation is None or "Tensor" in cst.Module([]).code_for_node(param.annotation.annotation)


def _fed_by_forward(module: cst.Module) -> dict[str, frozenset[str]]:
    """Module-level function -> the parameters to which a ``forward`` of a class of ``module``
    passes one of its inputs (``fourier(v, self.sigma)`` in ``def forward(self, v)``: ``fourier``'s
    first parameter), by position or keyword; a function defined twice is left out."""
    functions: dict[str, list[str] | None] = {}
    for s in module.body:
        if s.__class__ is cst.FunctionDef:
            p = s.params
            functions[s.name.value] = None if s.name.value in functions else [q.name.value for q in (*p.posonly_params, *p.params)]
    fed: dict[str, set[str]] = {}
    for cls in module.body:
        if cls.__class__ is not cst.ClassDef or cls.body.__class__ is not cst.IndentedBlock:
            continue
        for forward in cls.body.body:
            if forward.__class__ is not cst.FunctionDef or forward.name.value != "forward":
                continue
            p = forward.params
            inputs = {q.name.value for q in (*p.posonly_params, *p.params, *p.kwonly_params)[1:] if _may_be_input(q)}
            stack: list[cst.CSTNode] = [forward.body]
            while stack:
                node = stack.pop()
                if node.__class__ in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
                    continue
                stack.extend(node.children)
                if node.__class__ is not cst.Call or node.func.__class__ is not cst.Name:
                    continue
                names = functions.get(node.func.value)
                if not names:
                    continue
                for i, arg in enumerate(node.args):
                    if arg.star or _root_name(arg.value) not in inputs:
                        continue
                    target = arg.keyword.value if arg.keyword is not None else names[i] if i < len(names) else None
                    if target in names:
                        fed.setdefault(node.func.value, set()).add(target)
    return {name: frozenset(params) for name, params in fed.items()}


def _unplaced_factory(function: ast.AST, facts) -> bool:
    """Does ``function`` hold a call that may be a tensor factory without ``device=``?"""
    return any(
        node.__class__ is ast.Call and not any(kw.arg == "device" for kw in node.keywords) and resolves_to(node, facts, _ORIGINS)
        for node in nodes_under(function, facts)
    )


def _places(function: ast.AST, facts) -> bool:
    """Does ``function`` pass ``device=`` to a call, with anything but a ``"cpu"`` literal?"""
    for node in nodes_under(function, facts):
        if node.__class__ is ast.keyword and node.arg == "device":
            value = node.value
            if not (value.__class__ is ast.Constant and isinstance(value.value, str) and value.value.startswith("cpu")):
                return True
    return False
