"""DEV102: ``.cuda()`` on a tensor or module."""

from __future__ import annotations

import libcst as cst

from .. import edits
from ..device_scope import DeviceScope
from ..rule import NodeFix, Rule


#: The keywords of ``Tensor.cuda`` and ``Module.cuda``.
_TORCH_KEYWORDS = {"device", "non_blocking", "memory_format"}


class CudaMethodCall(Rule):
    """`.cuda()` pins a tensor or module to CUDA."""

    code = "DEV102"
    name = "cuda-method-call"
    message = ".cuda() pins this to CUDA: use .to(device)"
    triggers = (".cuda(",)
    needs_torch = False  # model.cuda() needs no import

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a call ``<expr>.cuda(...)``."""
        return "cuda" in facts.methods

    what_it_does = """
Flags `.cuda()` and `.cuda(N)` calls on any tensor or module outside an availability guard.
`torch.cuda` the module is left alone, and so is `.cuda()` under
`if torch.cuda.is_available():` or `if x.is_cuda:`."""
    why_bad = """
`.cuda()` raises `AssertionError: Torch not compiled with CUDA enabled` on a machine without
CUDA, and it cannot target Apple's MPS or Intel's XPU. `.to(device)` with a device chosen once
runs everywhere."""
    flagged = (
        '''model = torch.nn.Linear(4, 2).cuda()  # expect: DEV102
x = torch.randn(3, 4).cuda(0)  # expect: DEV102
''',
    )
    clean = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 2).to(device)
x = torch.randn(3, 4).to(device)
''',
        '''model = torch.nn.Linear(4, 2)
if torch.cuda.is_available():
    model = model.cuda()
print(torch.cuda.device_count())
''',
    )
    fix_safety = """
The fix is unsafe (the tensor or module then goes wherever the device points, which may be
the CPU), and is offered only where a device is already in scope (a `device` variable or
parameter, `self.device`, `args.device`, a `forward` input's `.device`): `x.cuda()` becomes
`x.to(device)`, keeping `non_blocking=` and `memory_format=`. `.cuda(0)` and
`.cuda(device=...)` name a GPU on purpose and get no fix."""
    requires = (DeviceScope,)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "cuda" or self.ctx.guarded:
            return
        positional = [a for a in node.args if a.keyword is None]
        keywords = {a.keyword.value for a in node.args if a.keyword is not None}
        if len(positional) > 2 or not keywords <= _TORCH_KEYWORDS:
            return  # not Tensor.cuda/Module.cuda: some other library's method (HQQ's quantizer.cuda(t, meta=...))
        receiver = self.ctx.resolve(func.value)
        if receiver is not None and receiver.split(".", 1)[0] in ("torch", "numba", "cupy", "jax"):
            return  # a module attribute, not the tensor method
        self.report(func.attr, fix=self._fix(node, positional, keywords))  # the `cuda` token: where # noqa goes

    def _fix(self, node: cst.Call, positional, keywords) -> NodeFix | None:
        """``x.cuda(non_blocking=True)`` -> ``x.to(device, non_blocking=True)``."""
        found = self.ctx.analysis(DeviceScope).device()
        if found is None or positional or "device" in keywords or any(a.star for a in node.args):
            return None
        to = node.func.with_changes(attr=cst.Name("to"))
        text = edits.call(node, [edits.arg(found.as_device()), *node.args], to)
        return NodeFix(f"use .to({found.as_device()})", ((node, text),), safe=False)
