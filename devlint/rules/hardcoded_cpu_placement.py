"""DEV103: ``.cpu()``/``.to("cpu")`` used to place compute."""

from __future__ import annotations

import ast

import libcst as cst

from ..devices import is_cpu
from ..modules import is_module_class, is_module_constructor, strip_module_methods
from ..precheck import arguments, builds_module, walk
from ..precheck import strip_module_methods as ast_strip
from ..rule import Rule

_USES = {"parameters", "named_parameters", "train", "forward", "__call__"}
_READOUT_PARENTS = {"detach"}


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
    message = "{call} places this on the CPU while the code elsewhere uses an accelerator: use .to(device)"
    triggers = (".cpu(", '"cpu"', "'cpu'")  # and torch: modules are recognised through it

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: an accelerator named in the text, and a top-level class or function (or the
        module's other statements) with a ``.cpu()`` or a ``.to("cpu")``/``.to(<call>)`` that
        calls (or trains, ``.parameters()``...) a name it binds to a module construction."""
        if not any(k in facts.text for k in ("cuda", "mps", "xpu", "accelerator", ".to(device")):
            return False
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
        return False
    what_it_does = """
Flags `.cpu()` and `.to("cpu")` used to *place* compute: on an `nn.Module` that is then
called, trained or optimised in the same scope, or on a tensor that is then fed to a model
that was moved to another device. Read-outs are left alone (`.cpu().numpy()`, `.item()`,
`.tolist()`, `.detach().cpu()`, printing, logging, saving, metrics), as are the
`else "cpu"` fallback, code that never uses an accelerator, offloading (a module moved to the
CPU and not used afterwards, e.g. to free accelerator memory) and export of a CPU copy
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
    )
    clean = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
out = model(torch.randn(3, 4, device=device))
print(out.detach().cpu().numpy(), out.sum().item())
model.cpu()
torch.onnx.export(model, torch.randn(1, 4), "model.onnx")
''',
    )
    fix_safety = "This rule has no autofix."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._states = [_State()]
        self._classes: set[str] = set()
        text = ctx.text
        self._accelerated = any(k in text for k in ("cuda", "mps", "xpu", "accelerator", ".to(device"))

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
        if cpu_call is not None and cpu_call is value:
            state.cpu_tensors[name] = cpu_call

    def visit_Expr(self, node: cst.Expr) -> None:
        value, state = node.value, self._states[-1]
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            receiver = value.func.value
            if isinstance(receiver, cst.Name) and receiver.value in state.modules:
                cpu_call, moved = self._placement(value)
                if cpu_call is not None:
                    state.cpu_modules[receiver.value] = cpu_call
                    state.on_device.discard(receiver.value)
                elif moved:
                    state.on_device.add(receiver.value)
                    state.cpu_modules.pop(receiver.value, None)

    def visit_Call(self, node: cst.Call) -> None:
        if not self._accelerated:
            return
        state, func = self._states[-1], node.func
        used = None
        if isinstance(func, cst.Name):
            used = func.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value in _USES:
            used = func.value.value
        if used is None:
            return
        if used in state.cpu_modules:
            call = state.cpu_modules.pop(used)
            self.report(call.func.attr, self.message.format(call=_spelling(call)))
        elif used in state.on_device:
            for arg in node.args:
                value = arg.value
                call = state.cpu_tensors.pop(value.value, None) if isinstance(value, cst.Name) else None
                if call is None:
                    call, _ = self._placement(value)
                    call = call if call is value else None
                if call is not None:
                    self.report(call.func.attr, self.message.format(call=_spelling(call)))


def _spelling(call: cst.Call) -> str:
    return ".cpu()" if call.func.attr.value == "cpu" else '.to("cpu")'

