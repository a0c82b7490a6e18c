"""DEV104: ``torch.load`` without ``map_location``."""

from __future__ import annotations

import ast

import libcst as cst

from .. import edits
from ..device_scope import DeviceScope
from ..rule import NodeFix, Rule


class LoadWithoutMapLocation(Rule):
    """`torch.load(f)` with no `map_location` cannot load a GPU checkpoint on a CPU."""

    code = "DEV104"
    name = "load-without-map-location"
    message = "torch.load without map_location fails on a CPU-only machine for a checkpoint saved on a GPU: pass map_location=device"

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a call of a torch function whose name holds "load", with at most two
        positional arguments, no ``map_location=`` and no ``*args``/``**kwargs``."""
        for table in (facts.methods, facts.functions):
            for last, calls in table.items():
                if "load" not in last:
                    continue
                for call in calls:
                    if len(call.args) > 2 or any(a.__class__ is ast.Starred for a in call.args):
                        continue
                    if any(kw.arg is None or kw.arg == "map_location" for kw in call.keywords):
                        continue
                    if any(n.startswith("torch.") for n in facts.resolve(call.func)):
                        return True
        return False
    what_it_does = """
Flags `torch.load(f)` calls that pass no `map_location` (keyword or second positional
argument) outside an availability guard. Any `map_location` (a device variable, `"cpu"`, a
lambda, a dict) satisfies it; `weights_only` is irrelevant. A call that forwards `**kwargs` is
left alone, since the keyword may be among them."""
    why_bad = """
`torch.load` restores each tensor to the device it was saved from. A checkpoint written on a
GPU then raises `RuntimeError: Attempting to deserialize object on a CUDA device but
torch.cuda.is_available() is False` on a CPU-only machine."""
    flagged = (
        '''state = torch.load("checkpoint.pt")  # expect: DEV104
''',
    )
    clean = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
state = torch.load("checkpoint.pt", map_location=device)
other = torch.load("other.pt", "cpu")
''',
    )
    fix_safety = """
The fix is unsafe: it changes where the loaded tensors are placed. It adds
`map_location=device` where a device is already in scope (a `device` variable or parameter,
`self.device`, `args.device`), else `map_location="cpu"`, which loads anywhere; the tensors
then need moving to the device they are used on."""
    requires = (DeviceScope,)

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded or self.ctx.resolve(node.func) != "torch.load":
            return
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if len(positional) >= 2 or any(a.star for a in node.args):
            return
        if any(a.keyword is not None and a.keyword.value == "map_location" for a in node.args):
            return
        found = self.ctx.analysis(DeviceScope).device()
        where = found.as_device() if found is not None else '"cpu"'
        text = edits.append_keyword(node, "map_location", where)
        self.report(node, fix=NodeFix(f"load onto {where}: map_location={where}", ((node, text),), safe=False))
