"""DEV112: a tensor factory without ``device=`` inside ``forward``."""

from __future__ import annotations

import ast

import libcst as cst

from ..dataflow import CPU, FACTORIES, INP, LEGACY_CONSTRUCTORS, DeviceFlow
from ..names import dotted
from ..precheck import methods_of, nodes_under, resolves_to
from ..rule import Rule

#: The calls the dataflow records as a CPU tensor's ``origins`` (the nodes this rule reports).
_ORIGINS = frozenset(f"torch.{name}" for name in (*FACTORIES, "tensor", "as_tensor", *LEGACY_CONSTRUCTORS))

#: Tensor methods whose tensor arguments may sit on another device (or are shapes).
_CROSS_DEVICE_OK = frozenset({"to", "copy_", "type_as", "expand", "view", "reshape", "repeat", "permute", "index_put_", "new_tensor"})


class FactoryWithoutDeviceInForward(Rule):
    """A tensor created in `forward` without `device=` meets the module's inputs or parameters."""

    code = "DEV112"
    name = "factory-without-device-in-forward"
    message = "forward makes a tensor without device=: pass device=x.device"
    triggers = ("forward",)
    requires = (DeviceFlow,)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a call that may be ``torch.zeros/tensor/FloatTensor/...`` without a
        ``device=`` keyword inside a ``def forward`` of a class. Such a call is the only origin
        of what this rule reports (``DeviceFlow`` keeps origins only on the factory results of
        the frame being walked: outer frames lend no tensors, ``self.`` attributes read in
        ``forward`` are inputs, a helper's summary has no origins), and ``forward`` (a method of
        a class) is the only frame it reports in."""
        for cls in facts.classes:
            for forward in methods_of(cls, "forward"):
                for node in nodes_under(forward, facts):
                    if (
                        node.__class__ is ast.Call
                        and not any(kw.arg == "device" for kw in node.keywords)
                        and resolves_to(node, facts, _ORIGINS)
                    ):
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
once (`torch.arange(n).to(x.device)`) are left alone."""
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
''',
    )
    fix_safety = "This rule has no autofix: `device=x.device` needs an input in reach, which the author picks."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._done: set[int] = set()

    def _flow(self) -> DeviceFlow | None:
        flow = self.ctx.analysis(DeviceFlow)
        return flow if flow.frame.forward else None

    def _report(self, v) -> None:
        for origin in v.origins:
            if id(origin) not in self._done:
                self._done.add(id(origin))
                self.report(origin)

    def _pair(self, flow: DeviceFlow, operands) -> None:
        values = [flow.value(o) for o in operands]
        if not any(v is not None and v.kind == INP for v in values):
            return
        for v in values:
            if v is not None and v.kind == CPU and v.origins and not v.explicit:
                self._report(v)

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
        has_input = any(v is not None and v.kind == INP for v in values)
        if isinstance(func, cst.Attribute) and flow.is_self(func.value):
            cls = flow.cls
            meets = cls is not None and func.attr.value in cls.torch_modules  # a custom submodule may move its inputs
        elif isinstance(func, cst.Attribute) and not (self.ctx.resolve(func) or "").startswith("torch."):
            method = func.attr.value
            receiver = flow.value(func.value)
            meets = (
                receiver is not None and receiver.kind == INP and method not in _CROSS_DEVICE_OK and not method.startswith("new_")
            )
        elif (self.ctx.resolve(func) or "").startswith("torch."):
            meets = has_input
        if meets:
            for v in cpu:
                self._report(v)
