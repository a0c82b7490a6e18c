"""DEV115: a loss module built with CPU class weights in a scope that moves the model."""

from __future__ import annotations

import libcst as cst

from ..dataflow import CPU, DeviceFlow
from ..names import dotted
from ..rule import Rule

_WEIGHT_KEYWORDS = frozenset({"weight", "pos_weight"})


class LossWeightNotOnDevice(Rule):
    """A loss module holds CPU weight tensors while the model was moved to a device."""

    code = "DEV115"
    name = "loss-weight-not-on-device"
    message = "loss weight on the CPU while the model moves: move the loss .to(device)"
    triggers = ("Loss",)
    requires = (DeviceFlow,)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a ``torch.nn`` loss built with arguments."""
        return any(
            (call.args or call.keywords) and any(n.startswith("torch.nn.") for n in facts.resolve(call.func))
            for table in (facts.methods, facts.functions) for last, calls in table.items() if last.endswith("Loss")
            for call in calls
        )

    what_it_does = """
Flags a `torch.nn` loss module (`nn.CrossEntropyLoss`, `nn.BCEWithLogitsLoss`, `nn.NLLLoss`...)
built with a tensor argument (`weight=`, `pos_weight=`, or the first positional argument)
that was created without a device (`torch.tensor([...])`, `torch.tensor(weights)` of NumPy or
sklearn class weights, a factory call, `torch.from_numpy`),
in a function or module body where a model is moved to a device and the loss module itself is
never moved. `criterion.to(device)`, weights created with `device=` or moved with
`.to(device)`, and scopes with no device move are left alone."""
    why_bad = """
The weight is a buffer of the loss module, so it stays on the CPU unless the loss module is
moved. The first loss computed on the GPU outputs raises `RuntimeError: Expected all tensors
to be on the same device` (on a GPU box only)."""
    flagged = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
weights = torch.tensor([1.0, 5.0])
criterion = nn.CrossEntropyLoss(weight=weights)  # expect: DEV115
model = nn.Linear(4, 2).to(device)
''',
    )
    clean = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 5.0]))
criterion.to(device)
bce = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0], device=device))
''',
    )
    fix_safety = "This rule has no autofix."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        #: per scope: (data-flow frame, loss name -> flagged call, names bound to host class weights)
        self._scopes: list[tuple[object, dict, set]] = [(ctx.analysis(DeviceFlow).frame, {}, set())]

    def _weighted_loss(self, flow: DeviceFlow, call: cst.Call) -> bool:
        name = self.ctx.resolve(call.func) or ""
        if not (name.startswith("torch.nn.") and name.endswith("Loss")):
            return False
        for i, arg in enumerate(call.args):
            if arg.star or not (i == 0 and arg.keyword is None or arg.keyword is not None and arg.keyword.value in _WEIGHT_KEYWORDS):
                continue
            v = flow.value(arg.value)
            if v is not None and v.kind == CPU and not v.explicit and not v.module:
                return True
            if self._host_tensor(flow, arg.value) or dotted(arg.value) in self._scopes[-1][2]:
                return True
        return False

    def _host_tensor(self, flow: DeviceFlow, expr: cst.BaseExpression) -> bool:
        """``torch.tensor(weights)``/``torch.as_tensor(weights)`` without ``device=`` of data that
        is not known to be a tensor (a NumPy array, sklearn's ``compute_class_weight``): class
        weights built on the CPU. The data flow keeps such a call unknown, since
        ``torch.tensor(t)`` of a GPU tensor stays on the GPU; a loss weight is not one."""
        if not isinstance(expr, cst.Call) or (self.ctx.resolve(expr.func) or "") not in ("torch.tensor", "torch.as_tensor"):
            return False
        if not expr.args or expr.args[0].keyword is not None or any(a.keyword is not None and a.keyword.value == "device" for a in expr.args):
            return False
        data = flow.value(expr.args[0].value)
        return data is None or (data.kind == CPU and not data.module)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append((self.ctx.analysis(DeviceFlow).frame, {}, set()))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._finish(*self._scopes.pop())

    def leave_Module(self, node: cst.Module) -> None:
        while self._scopes:
            self._finish(*self._scopes.pop())

    def _finish(self, frame, found: dict, hosts: set) -> None:
        if frame.moved and not frame.silent:
            for where in found.values():
                self.report(where)

    def visit_Assign(self, node: cst.Assign) -> None:
        flow = self.ctx.analysis(DeviceFlow)
        found, hosts = self._scopes[-1][1], self._scopes[-1][2]
        value = node.value
        for target in node.targets:
            name = dotted(target.target)
            if name is None:
                continue
            found.pop(name, None)
            hosts.discard(name)
            if self._host_tensor(flow, value):
                hosts.add(name)
            if isinstance(value, cst.Call) and self._weighted_loss(flow, value):
                cls = flow.cls
                if name.startswith(f"{flow.frame.self_name}.") and (cls is None or cls.is_module):
                    continue
                found[name] = value

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda"):
            name = dotted(func.value)
            if name is not None:
                self._scopes[-1][1].pop(name, None)
                self._scopes[-1][2].discard(name)
