"""DEV104: ``torch.load`` (and the hub's URL loaders) without ``map_location``."""

from __future__ import annotations

import ast

import libcst as cst

from .. import edits
from ..device_scope import DeviceScope
from ..rule import NodeFix, Rule

#: loader -> the 0-based position of its ``map_location`` parameter.
_LOADERS = {
    "torch.load": 1,
    "torch.serialization.load": 1,
    "torch.hub.load_state_dict_from_url": 2,  # (url, model_dir=None, map_location=None, ...)
    "torch.utils.model_zoo.load_url": 2,  # the same function under its old name
}


class LoadWithoutMapLocation(Rule):
    """`torch.load(f)` with no `map_location` cannot load a GPU checkpoint on a CPU."""

    code = "DEV104"
    name = "load-without-map-location"
    message = "{func} without map_location fails without CUDA: pass map_location"
    triggers = ("load(", "load_url", "load_state_dict_from_url")

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a call whose name holds "load" and that may resolve to one of the loaders
        (``_LOADERS``), with no more positional arguments than come before its
        ``map_location``, no ``map_location=`` and no ``*args``/``**kwargs``."""
        for table in (facts.methods, facts.functions):
            for last, calls in table.items():
                if "load" not in last:
                    continue
                for call in calls:
                    if any(a.__class__ is ast.Starred for a in call.args):
                        continue
                    if any(kw.arg is None or kw.arg == "map_location" for kw in call.keywords):
                        continue
                    if any(len(call.args) <= _LOADERS[n] for n in facts.resolve(call.func) if n in _LOADERS):
                        return True
        return False

    what_it_does = """
Flags `torch.load(f)`, `torch.hub.load_state_dict_from_url(url)` and
`torch.utils.model_zoo.load_url(url)` calls (any import spelling) that pass no `map_location`
(keyword, or the positional argument in its place: second for `torch.load`, third for the URL
loaders) outside an availability guard. Any `map_location` (a device variable, `"cpu"`, a
lambda, a dict) satisfies it; `weights_only` is irrelevant. A call that forwards `*args` or
`**kwargs` is left alone, since the argument may be among them."""
    why_bad = """
`torch.load` restores each tensor to the device it was saved from, and the URL loaders call
`torch.load` on the downloaded file. A checkpoint written on a GPU then raises
`RuntimeError: Attempting to deserialize object on a CUDA device but
torch.cuda.is_available() is False` on a CPU-only machine."""
    flagged = (
        '''state = torch.load("checkpoint.pt")  # expect: DEV104
weights = torch.hub.load_state_dict_from_url("https://example.com/w.pth")  # expect: DEV104
''',
    )
    clean = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
state = torch.load("checkpoint.pt", map_location=device)
other = torch.load("other.pt", "cpu")
weights = torch.hub.load_state_dict_from_url("https://example.com/w.pth", map_location="cpu")
''',
    )
    fix_safety = """
The fix is unsafe: it changes where the loaded tensors are placed. It adds
`map_location=device` where a device is already in scope (a `device` variable or parameter,
`self.device`, `args.device`), else `map_location="cpu"`, which loads anywhere; the tensors
then need moving to the device they are used on."""
    requires = (DeviceScope,)

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        func = self.ctx.resolve(node.func)
        position = _LOADERS.get(func)
        if position is None:
            return
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if len(positional) > position or any(a.star for a in node.args):
            return
        if any(a.keyword is not None and a.keyword.value == "map_location" for a in node.args):
            return
        found = self.ctx.analysis(DeviceScope).device()
        where = found.as_device() if found is not None else '"cpu"'
        text = edits.append_keyword(node, "map_location", where)
        title = f"load onto the device in scope: map_location={where}" if found is not None \
            else 'load onto the CPU (no device variable in scope): map_location="cpu"'
        self.report(node, self.fitted(self.message.format(func=func), self.message.format(func=func.rsplit(".", 1)[-1]),
                                            f"{func.rsplit('.', 1)[-1]} fails without CUDA: pass map_location"), fix=NodeFix(title, ((node, text),), safe=False))
