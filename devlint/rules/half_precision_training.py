"""DEV208: a module cast to float16 in a scope that trains it (or to bfloat16 with a GradScaler)."""

from __future__ import annotations

import libcst as cst

from ..amp import Frame, FrameRule, casts_to_bfloat16
from ..names import dotted
from ..precheck import arguments
from ..rule import Site

_FLOAT32 = {"torch.float32", "torch.float"}
_FP16 = frozenset({"torch.float16", "torch.half"})


class HalfPrecisionTraining(FrameRule):
    """`model.half()` / `.to(torch.float16)` on a module in a scope that trains."""

    code = "DEV208"
    name = "half-precision-training"
    message = "module cast to float16 and trained: keep float32 weights, use autocast"
    bf16_message = "GradScaler fails on a module cast to bfloat16: drop the scaler"
    triggers = (".half(", "float16", "torch.half")

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a training event (``.backward()``, ``torch.autograd.backward``, a
        ``.step()``) and a cast that may be a module's: ``.half()``, or ``.to(...)`` with an
        argument that may be ``torch.float16``/``torch.half``; or, for the bfloat16 message,
        ``.bfloat16()``/``.to(...)`` with one that may be ``torch.bfloat16`` and a ``.scale(...)``."""
        if not ("backward" in facts.methods or "step" in facts.methods or facts.calls_to({"torch.autograd.backward"})):
            return False
        if "half" in facts.methods:
            return True
        dtypes = set().union(*(facts.resolve(a) for call in facts.methods.get("to", ()) for a in arguments(call)))
        if not dtypes.isdisjoint(_FP16):
            return True
        return "scale" in facts.methods and ("bfloat16" in facts.methods or "torch.bfloat16" in dtypes)

    what_it_does = """
Flags `.half()` and `.to(torch.float16)`/`.to(dtype=torch.half)` on a module (an `nn`
constructor, an instance of an `nn.Module` subclass of the file, a name bound to one, or a
name like `model`/`net`) in a scope (function or module) that also back-propagates or steps an
optimizer; and `.bfloat16()`/`.to(torch.bfloat16)` on a module in a scope that trains it with a
GradScaler (`scaler.scale(loss)`) and opens no float16 autocast region. Left alone: `.half()`
for inference, casts of tensors, and `.half().float()` (or a later `model.float()` in the same
scope), which rounds the weights to float16 precision and trains in float32."""
    why_bad = """
Pure float16 weights cannot absorb small updates: `w + lr * g` rounds back to `w` once the
update is below float16's resolution, so training stalls, and a GradScaler refuses to work
(`ValueError: Attempting to unscale FP16 gradients`). Mixed precision keeps float32 master
weights and computes in float16 only under autocast. bfloat16 weights train without a scaler;
with one, `scaler.step` raises on CUDA
(`"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for 'BFloat16'`)."""
    flagged = (
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 1).to(dev).half()  # expect: DEV208
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(4, 8, device=dev).half()).float().mean().backward()
opt.step()
''',
        '''def train(model, opt, batches, device):
    model = model.to(device, dtype=torch.bfloat16)  # expect: DEV208
    scaler = torch.amp.GradScaler(device.type)  # expect: DEV209
    for x in batches:
        scaler.scale(model(x.to(device, dtype=torch.bfloat16)).float().mean()).backward()
        scaler.step(opt)
        scaler.update()
''',
    )
    clean = (
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"


def predict(model, x):
    model = model.half().eval()
    with torch.no_grad():
        return model(x.half())


def train_step(model, opt, x):
    x16 = x.half()
    model(x16.float()).mean().backward()
    opt.step()


def train_rounded(model, opt, x):
    model = model.half().float()
    model(x).mean().backward()
    opt.step()
''',
    )
    fix_safety = "This rule has no autofix."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._undone: set[int] = set()  # `.half()` calls cast straight back: `.half().float()`
        self._restored: dict[int, set[str]] = {}  # per frame: names cast back by `model.float()`
        self._bf16: dict[int, list[Site]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        amp = self.amp
        frame = amp.frame
        back = func.attr.value in ("float", "double") and not node.args
        back = back or (func.attr.value == "to" and any(self.ctx.resolve(a.value) in _FLOAT32 for a in node.args))
        if back:
            self._undone.add(id(func.value))
            name = dotted(func.value)
            if name is not None and frame is not None:
                self._restored.setdefault(id(frame), set()).add(name)
        elif frame is not None and casts_to_bfloat16(node, amp) and amp.is_module(func.value):
            self._bf16.setdefault(id(frame), []).append(Site(node, self.ctx.statement_index))

    def check(self, frame: Frame) -> None:
        restored = self._restored.pop(id(frame), set())
        bf16 = self._bf16.pop(id(frame), [])
        if not any(e.kind in ("backward", "opt_step", "step") for e in frame.events):
            return
        for event in frame.of("half"):
            receiver = event.node.func.value if isinstance(event.node.func, cst.Attribute) else None
            if id(event.node) in self._undone or dotted(receiver) in restored:
                continue
            self.report_at(event)
        if bf16 and any(frame.of("scale")) and not any(r.float16 for r, _ in frame.regions if r.active):
            for site in bf16:
                self.report_at(site, self.bf16_message)
