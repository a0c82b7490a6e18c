"""DEV116: ``optimizer.load_state_dict`` before the model moves to its device."""

from __future__ import annotations

import libcst as cst

from ..dataflow import DeviceFlow
from ..names import dotted
from ..rule import Rule


class OptimizerStateBeforeMove(Rule):
    """The optimizer's state was loaded before its model was moved to the device."""

    code = "DEV116"
    name = "optimizer-state-before-move"
    message = "model moved after its optimizer loaded state: move the model first"
    triggers = ("load_state_dict",)
    requires = (DeviceFlow,)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: ``load_state_dict``, a move, and a ``torch.optim`` class."""
        if "load_state_dict" not in facts.methods or not ("to" in facts.methods or "cuda" in facts.methods):
            return False
        return any(
            n.startswith("torch.optim.")
            for table in (facts.methods, facts.functions) for last, calls in table.items() if last[:1].isupper()
            for call in calls for n in facts.resolve(call.func)
        )

    what_it_does = """
Follows which model each optimizer holds (`opt = torch.optim.Adam(model.parameters())`) and
flags, in the same function or module body, a move of that model (`model.to(device)`,
`model.cuda()`) that comes after `opt.load_state_dict(...)`. Moving the model before building
the optimizer or before loading its state is left alone, as are `.to(dtype)` casts."""
    why_bad = """
`optimizer.load_state_dict` casts the saved state (Adam's moments, momentum buffers) to the
device of the parameters *at that moment*. Moving the model afterwards moves the parameters
but not the state, and the first `optimizer.step()` raises `RuntimeError: Expected all tensors
to be on the same device` on a GPU box."""
    flagged = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters())
ckpt = torch.load("ckpt.pt", map_location="cpu")
opt.load_state_dict(ckpt["opt"])
model.to(device)  # expect: DEV116
''',
    )
    clean = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 1).to(device)
opt = torch.optim.Adam(model.parameters())
ckpt = torch.load("ckpt.pt", map_location="cpu")
opt.load_state_dict(ckpt["opt"])
model.to(torch.float32)
''',
    )
    fix_safety = "This rule has no autofix: the move has to go before the optimizer is built or loaded."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._opts: list[dict[str, str]] = [{}]
        self._loaded: list[set[str]] = [set()]
        self._class_opts: dict[str, str] = {}

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._class_opts = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._opts.append({})
        self._loaded.append(set())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._opts.pop()
        self._loaded.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if not isinstance(value, cst.Call):
            return
        name = self.ctx.resolve(value.func) or ""
        last = name.rsplit(".", 1)[-1]
        if not (name.startswith("torch.optim.") and last[:1].isupper()) or name.startswith("torch.optim.lr_scheduler"):
            return
        model = _parameters_owner(value)
        if model is None:
            return
        for target in node.targets:
            opt = dotted(target.target)
            if opt is not None:
                (self._class_opts if opt.startswith("self.") else self._opts[-1])[opt] = model

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method, receiver = func.attr.value, dotted(func.value)
        if receiver is None:
            return
        loaded = self._loaded[-1]
        if method == "load_state_dict":
            model = self._opts[-1].get(receiver) or self._class_opts.get(receiver)
            if model is not None:
                loaded.add(model)
        elif method in ("to", "cuda") and receiver in loaded:
            flow = self.ctx.analysis(DeviceFlow)
            target = next((a.value for a in node.args if a.keyword is None or a.keyword.value == "device"), None)
            if method == "to" and (target is None or flow.is_dtype(target)):
                return
            loaded.discard(receiver)
            self.report(node)


def _parameters_owner(call: cst.Call) -> str | None:
    """``model`` for ``Adam(model.parameters())`` (also inside param-group lists and dicts)."""
    stack = [a.value for a in call.args]
    while stack:
        expr = stack.pop()
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("parameters", "named_parameters"):
                return dotted(func.value)
            stack.extend(a.value for a in expr.args)
        elif isinstance(expr, (cst.List, cst.Tuple)):
            stack.extend(e.value for e in expr.elements)
        elif isinstance(expr, cst.Dict):
            stack.extend(e.value for e in expr.elements if isinstance(e, cst.DictElement))
        elif isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            stack.append(expr.elt)
    return None
