"""DEV210: a custom ``torch.autograd.Function`` without ``custom_fwd`` in a module that autocasts."""

from __future__ import annotations

import libcst as cst

from ..amp import Frame, FrameRule
from ..names import dotted
from ..precheck import methods_of
from ..rule import Site

_FUNCTIONS = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
_PLAIN = frozenset({"staticmethod", "classmethod"})


class CustomFunctionWithoutCustomFwd(FrameRule):
    """A custom `torch.autograd.Function` whose `forward` lacks `@torch.amp.custom_fwd`, where autocast is used."""

    code = "DEV210"
    name = "custom-function-without-custom-fwd"
    message = "Function.forward lacks @torch.amp.custom_fwd under autocast: decorate it"
    triggers = ("autocast",)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a class with a base that may be ``torch.autograd.Function`` (through the
        file's imports) and a ``forward`` method, the only thing this rule reports."""
        return any(
            any(facts.resolve(b) & _FUNCTIONS for b in cls.bases) and methods_of(cls, "forward")
            for cls in facts.classes
        )
    what_it_does = """
Flags the `forward` definition of a `torch.autograd.Function` subclass (any import spelling)
when the same file opens an enabled autocast region (`with torch.autocast(...)`, a decorator,
the deprecated spellings) and neither `forward` nor `backward` carries a decorator besides
`@staticmethod` (`@torch.amp.custom_fwd`, `@torch.cuda.amp.custom_fwd`, or a project's own
wrapper of it). Left alone: files without autocast, or whose only region is
`enabled=False`, and the `forward(inputs...)`/`setup_context` style, whose first parameter is
not `ctx`."""
    why_bad = """
Under autocast, the Function's `forward` receives whatever dtypes the ops before it produced
(float16 activations next to float32 weights), which a hand-written kernel rarely expects,
and its `backward` runs outside autocast with other dtypes than the forward saw.
`@torch.amp.custom_fwd(device_type=..., cast_inputs=torch.float32)` casts the inputs (or keeps
the caller's autocast state) and `@torch.amp.custom_bwd` runs backward in the forward's state."""
    flagged = (
        '''class Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # expect: DEV210
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, grad):
        return grad


def predict(model, x, device):
    with torch.autocast(device.type):
        return Clamp.apply(model(x))
''',
    )
    clean = (
        '''class Clamp(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, x):
        return x.clamp(-1, 1)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        return grad


def predict(model, x, device):
    with torch.autocast(device.type):
        return Clamp.apply(model(x))
''',
    )
    fix_safety = "This rule has no autofix: the device type and `cast_inputs` are the author's choice."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._candidates: list[Site] = []
        self._autocast = False

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if not any(self.ctx.resolve(b.value) in _FUNCTIONS for b in node.bases):
            return
        if not isinstance(node.body, cst.IndentedBlock):
            return
        methods = {s.name.value: s for s in node.body.body if isinstance(s, cst.FunctionDef)}
        forward = methods.get("forward")
        if forward is None:
            return
        for method in (forward, methods.get("backward")):
            if method is not None and any(dotted(d.decorator) not in _PLAIN for d in method.decorators):
                return  # custom_fwd/custom_bwd, or a wrapper of them
        params = forward.params.params
        if not params or params[0].name.value != "ctx":
            return
        self._candidates.append(Site(forward.name, self.ctx.statement_index))

    def check(self, frame: Frame) -> None:
        if any(r.active for r, _ in frame.regions):
            self._autocast = True
        if frame.kind == "module" and self._autocast:
            for site in self._candidates:
                self.report_at(site)
