"""DEV208: a module cast to float16 in a scope that trains it."""

from __future__ import annotations

from ..amp import Frame, FrameRule
from ..precheck import arguments, unit_trains


class HalfPrecisionTraining(FrameRule):
    """`model.half()` / `.to(torch.float16)` on a module in a scope that trains."""

    code = "DEV208"
    name = "half-precision-training"
    message = "module cast to float16 in a scope that trains it: keep float32 weights and use torch.autocast with a GradScaler"
    triggers = (".half(", "float16", "torch.half")

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a top-level class or function (or the module's other statements) that
        casts to float16 or bfloat16 (``.half()``, ``.bfloat16()``, ``.to(<dtype>)``) and calls
        ``.backward()``, ``.step(...)`` or ``torch.autograd.backward``."""
        low = {"torch.float16", "torch.half", "torch.bfloat16"}
        for unit in facts.units:
            if not unit_trains(unit, facts):
                continue
            if "half" in unit.methods or "bfloat16" in unit.methods:
                return True
            if any(facts.resolve(a) & low for call in unit.methods.get("to", ()) for a in arguments(call)):
                return True
        return False
    what_it_does = """
Flags `.half()` and `.to(torch.float16)`/`.to(dtype=torch.half)` on a module (an `nn`
constructor, an instance of an `nn.Module` subclass of the file, a name bound to one, or a
name like `model`/`net`) in a scope (function or module) that also back-propagates or steps an
optimizer. `.half()` for inference, and on tensors, is left alone."""
    why_bad = """
Pure float16 weights cannot absorb small updates: `w + lr * g` rounds back to `w` once the
update is below float16's resolution, so training stalls, and a GradScaler refuses to work
(`ValueError: Attempting to unscale FP16 gradients`). Mixed precision keeps float32 master
weights and computes in float16 only under autocast."""
    flagged = (
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 1).to(dev).half()  # expect: DEV208
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(4, 8, device=dev).half()).float().mean().backward()
opt.step()
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
''',
    )
    fix_safety = "This rule has no autofix."

    def check(self, frame: Frame) -> None:
        if not any(e.kind in ("backward", "opt_step", "step") for e in frame.events):
            return
        for event in frame.of("half"):
            self.report_at(event)
