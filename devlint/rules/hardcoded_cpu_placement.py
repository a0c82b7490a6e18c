"""DEV103: ``.cpu()``/``.to("cpu")`` used to place compute."""

from __future__ import annotations

import ast

import libcst as cst

from ..dataflow import _MODEL_METHODS, CPU, DEV, DTYPES, DeviceFlow, _cpu_side_item
from ..devices import is_cpu
from ..modules import is_module_class, is_module_constructor, strip_module_methods
from ..precheck import arguments, builds_module, unit_may_move, walk
from ..precheck import strip_module_methods as ast_strip
from ..rule import Rule

_USES = {"parameters", "named_parameters", "train", "forward", "__call__"}
_READOUT_PARENTS = {"detach"}
_ACCELERATOR_WORDS = ("cuda", "mps", "xpu", "accelerator", ".to(device")


def _cpu_chain(expr: ast.AST) -> bool:
    """May the method chain of ``expr`` hold a ``.cpu()`` or a ``.to("cpu")`` (also
    ``.to(torch.device("cpu"))``: any call as the target)? (stdlib ``ast``)"""
    while expr.__class__ is ast.Call and expr.func.__class__ is ast.Attribute:
        method = expr.func.attr
        if method == "cpu" or (method == "to" and any(
            (a.__class__ is ast.Constant and a.value == "cpu") or a.__class__ is ast.Call for a in arguments(expr)
        )):
            return True
        expr = expr.func.value
    return False


def _cpu_uses(unit) -> tuple[bool, bool]:
    """(does a call of the unit take a ``.cpu()`` chain, or a name bound to one, as an argument;
    does it call, or train, a name bound to one or placed by a ``name.cpu()`` statement)"""
    named: set[str] = set()
    calls = []
    for node in unit.walk():
        t = node.__class__
        if t is ast.Assign and len(node.targets) == 1 and node.targets[0].__class__ is ast.Name:
            if _cpu_chain(node.value):
                named.add(node.targets[0].id)
        elif t is ast.Expr and _cpu_chain(node.value) and node.value.func.value.__class__ is ast.Name:
            named.add(node.value.func.value.id)
        elif t is ast.Call:
            calls.append(node)
    fed = called = False
    for call in calls:
        func = call.func
        if func.__class__ is ast.Attribute and func.attr in _USES:
            func = func.value
        called = called or (func.__class__ is ast.Name and func.id in named)
        fed = fed or any(_cpu_chain(a) or (a.__class__ is ast.Name and a.id in named) for a in call.args)
    return fed, called


class _State:
    __slots__ = ("modules", "on_device", "cpu_modules", "cpu_tensors")

    def __init__(self) -> None:
        self.modules: set[str] = set()
        self.on_device: set[str] = set()
        self.cpu_modules: dict[str, cst.Call] = {}
        self.cpu_tensors: dict[str, cst.Call] = {}


class HardcodedCpuPlacement(Rule):
    """`.cpu()` / `.to("cpu")` that places a model, or a model's input, on the CPU."""

    code = "DEV103"
    name = "hardcoded-cpu-placement"
    message = "{call} pins this module to the CPU: use .to(device)"
    input_message = "{call} moves this input off the model's device: use .to(device)"
    triggers = (".cpu(", '"cpu"', "'cpu'")  # and torch: modules are recognised through it

    requires = (DeviceFlow,)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a top-level class or function (or the module's other statements) with a
        ``.cpu()`` or a ``.to("cpu")``/``.to(<call>)`` that calls (or trains, ``.parameters()``...)
        a name it binds to a module construction, or a name it binds to a ``.cpu()`` chain or
        places with a ``name.cpu()`` statement; or, where something may be moved to an
        accelerator (:func:`unit_may_move`), a call given a ``.cpu()`` chain (or a name bound to
        one) as an argument."""
        moving = None
        for unit in facts.units:
            if not ("cpu" in unit.methods or any(
                (a.__class__ is ast.Constant and a.value == "cpu") or a.__class__ is ast.Call
                for call in unit.methods.get("to", ()) for a in arguments(call)
            )):
                continue
            built = set()
            nodes = walk(unit.node) if unit.node is not None else (n for st in facts.tree.body for n in walk(st))
            for node in nodes:
                if node.__class__ is ast.Assign and len(node.targets) == 1 and node.targets[0].__class__ is ast.Name:
                    inner = ast_strip(node.value)
                    if builds_module(inner, facts) or (inner.__class__ is ast.Name and inner.id in built):
                        built.add(node.targets[0].id)
            if built & unit.functions.keys() or any(
                call.func.value.__class__ is ast.Name and call.func.value.id in built
                for call in unit.calls(*_USES)
                if call.func.__class__ is ast.Attribute
            ):
                return True
            fed, called = _cpu_uses(unit)
            if called:
                return True
            if fed:
                if moving is None:
                    moving = any(unit_may_move(u, facts, DTYPES) for u in facts.units)
                if moving:
                    return True
        return False
    what_it_does = """
Flags `.cpu()` and `.to("cpu")` used to *place* compute: on an `nn.Module` that is then
called, trained or optimised in the same scope (also in a script that never names an
accelerator: the hardcoded placement is what `.to(device)` replaces), or on a tensor that is
then fed to a model that was moved to another device (`model(x.cpu())`, `h = x.cpu();
model(h)`, also where the model is a parameter moved with `model.to(device)` or kept on
`self`), or to a loss together with a tensor on that device. Read-outs are left alone
(`.cpu().numpy()`, `.item()`, `.tolist()`, `.detach().cpu()`, printing, logging, saving,
metrics), as are the `else "cpu"` fallback, CPU tensors in code that never uses an
accelerator, lengths that `pack_padded_sequence` wants on the CPU (`lengths.cpu()`),
`nn.DataParallel` (which scatters CPU inputs), offloading (a module moved to the CPU and not
used afterwards, e.g. to free accelerator memory) and export of a CPU copy
(`torch.onnx.export`, `torch.jit.trace`)."""
    why_bad = """
A model pinned to the CPU silently trains on the CPU on a GPU box, and a CPU input fed to a
model on the GPU raises `RuntimeError: Expected all tensors to be on the same device, but
found at least two devices, cuda:0 and cpu!`."""
    flagged = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2)
model.to("cpu")  # expect: DEV103
opt = torch.optim.SGD(model.parameters(), lr=0.1)
''',
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
x = torch.randn(3, 4, device=device)
features = x.cpu()  # expect: DEV103
out = model(features)
''',
        '''def evaluate(model, x, device):
    model = model.to(device)
    return model(x.cpu())  # expect: DEV103
''',
        '''model = nn.Linear(4, 2)
model.cpu()  # expect: DEV103
print(model(torch.randn(3, 4)))
''',
    )
    clean = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
out = model(torch.randn(3, 4, device=device))
print(out.detach().cpu().numpy(), out.sum().item())
model.cpu()
torch.onnx.export(model, torch.randn(1, 4), "model.onnx")
''',
        '''def encode(rnn, tokens, lengths, device):
    rnn.to(device)
    return rnn(tokens.to(device), lengths.cpu())  # pack_padded_sequence wants CPU lengths
''',
    )
    fix_safety = "This rule has no autofix."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._states = [_State()]
        self._classes: set[str] = set()
        text = ctx.text
        self._accelerated = any(k in text for k in _ACCELERATOR_WORDS)

    # -- scopes -------------------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if is_module_class(node, self.ctx, self._classes):
            self._classes.add(node.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._states.append(_State())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._states.pop()

    # -- what an expression is ----------------------------------------------------------------
    def _is_module_expr(self, expr: cst.BaseExpression) -> bool:
        inner = strip_module_methods(expr)
        if isinstance(inner, cst.Name):
            return inner.value in self._states[-1].modules
        return is_module_constructor(inner, self.ctx, self._classes)

    def _placement(self, expr: cst.BaseExpression) -> tuple[cst.Call | None, bool]:
        """(the last .cpu()/.to("cpu") call in a method chain, moved to an accelerator after?)"""
        cpu_call, moved = None, False
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method in ("cpu", "to") and cpu_call is None and not moved:
                if method == "cpu" or (expr.args and is_cpu(expr.args[0].value, self.ctx)):
                    receiver = expr.func.value
                    is_readout = (
                        isinstance(receiver, cst.Call)
                        and isinstance(receiver.func, cst.Attribute)
                        and receiver.func.attr.value in _READOUT_PARENTS
                    )
                    if not is_readout:
                        cpu_call = expr
                elif expr.args or method == "cuda":
                    moved = True
            elif method == "cuda":
                moved = True
            expr = expr.func.value
        return cpu_call, moved

    # -- events -------------------------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        name, value, state = node.targets[0].target.value, node.value, self._states[-1]
        state.cpu_tensors.pop(name, None)
        if self._is_module_expr(value):
            state.modules.add(name)
            cpu_call, moved = self._placement(value)
            if cpu_call is not None:
                state.cpu_modules[name] = cpu_call
                state.on_device.discard(name)
            elif moved:
                state.on_device.add(name)
                state.cpu_modules.pop(name, None)
            return
        cpu_call, _ = self._placement(value)
        if cpu_call is not None and (cpu_call is value or self._explicit_cpu(value)):
            state.cpu_tensors[name] = cpu_call

    def visit_Expr(self, node: cst.Expr) -> None:
        value, state = node.value, self._states[-1]
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            receiver = value.func.value
            if isinstance(receiver, cst.Name):  # `x.cpu()` as a statement moves a module in place
                cpu_call, moved = self._placement(value)
                if cpu_call is not None:
                    state.cpu_modules[receiver.value] = cpu_call
                    state.on_device.discard(receiver.value)
                elif moved:
                    state.on_device.add(receiver.value)
                    state.cpu_modules.pop(receiver.value, None)

    def visit_Call(self, node: cst.Call) -> None:
        state, func = self._states[-1], node.func
        used = None
        if isinstance(func, cst.Name):
            used = func.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value in _USES:
            used = func.value.value
        if used is not None and (used in state.cpu_modules or used in state.cpu_tensors):
            # `net = net.cpu()` then `net(x)`: only a module is called (or trained)
            call = state.cpu_modules.pop(used, None) or state.cpu_tensors.pop(used)
            self.report(call.func.attr, self.message.format(call=_spelling(call)))
            return
        flow = self.ctx.analysis(DeviceFlow)
        if flow.silent or flow.scatters:
            return  # the data is placed by a framework, or scattered by nn.DataParallel
        if used is not None and self._accelerated and used in state.on_device:
            self._check_inputs(node, state, loss=False)
            return
        moved = self._moved_callee(func)
        if moved is not None:
            self._check_inputs(node, state, loss=moved)

    # -- a moved model (or a loss on device tensors) given a CPU tensor ------------------------
    def _explicit_cpu(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a tensor put on the CPU by ``.cpu()``/``.to("cpu")`` (the dataflow's
        explicit CPU kind, which survives ``.float()``, ``.unsqueeze(0)``...)?"""
        v = self.ctx.analysis(DeviceFlow).value(expr)
        return v is not None and v.kind == CPU and v.explicit

    def _moved_callee(self, func: cst.BaseExpression) -> bool | None:
        """``False`` for a model the dataflow knows is on a device (``model(...)``,
        ``self.net(...)``, ``model.generate(...)``), ``True`` for a loss (named like one, or a
        ``torch.nn.functional`` loss), ``None`` otherwise."""
        flow = self.ctx.analysis(DeviceFlow)
        v = None
        if func.__class__ is cst.Name:
            v = flow.lookup(func.value)
        elif func.__class__ is cst.Attribute:
            if flow.is_self(func.value):
                v = flow.self_attr(func.attr.value)
            elif func.attr.value in _MODEL_METHODS:
                v = flow.value(func.value)
        if v is not None and (v.kind == DEV or v.loss):
            return bool(v.loss)
        if flow.is_loss_function(func) or (v is None and flow.loss_named(func)):
            return True
        return None

    def _check_inputs(self, node: cst.Call, state: _State, loss: bool) -> None:
        """Report each positional argument of ``node`` put on the CPU by ``.cpu()`` (directly, or
        through a name bound to such a chain); for a loss, only next to a device tensor."""
        flow = self.ctx.analysis(DeviceFlow)
        found = []
        for arg in node.args:
            if arg.keyword is not None or arg.star:
                continue
            value = arg.value
            if isinstance(value, cst.Name) and value.value in state.cpu_tensors:
                found.append((value, state.cpu_tensors[value.value]))
                continue
            call, _ = self._placement(value)
            if call is not None and (call is value or self._explicit_cpu(value)):
                found.append((value, call))
        if loss and not any(
            (v := flow.value(a.value)) is not None and v.kind == DEV and not v.module for a in node.args if a.keyword is None
        ):
            return
        for value, call in found:
            if _cpu_side_item(call.func.value):
                continue  # pack_padded_sequence(x, lengths.cpu()): CPU by design
            if isinstance(value, cst.Name):
                state.cpu_tensors.pop(value.value, None)
            self.report(call.func.attr, self.input_message.format(call=_spelling(call)))


def _spelling(call: cst.Call) -> str:
    return ".cpu()" if call.func.attr.value == "cpu" else '.to("cpu")'

