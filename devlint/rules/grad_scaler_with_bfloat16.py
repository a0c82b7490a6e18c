"""DEV209: a GradScaler where everything is bfloat16."""

from __future__ import annotations

import libcst as cst

from ..amp import GRAD_SCALERS, Frame, FrameRule, casts_to_bfloat16
from ..names import dotted
from ..rule import Site


class GradScalerWithBfloat16(FrameRule):
    """A GradScaler used where autocast is bfloat16 only, or on a module cast to bfloat16."""

    code = "DEV209"
    name = "grad-scaler-with-bfloat16"
    message = "GradScaler with bfloat16 is needless, fails on CUDA: use it for float16"
    triggers = ("bfloat16",)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a call that may build a ``GradScaler`` (through the file's imports) and a
        call ``<expr>.scale(...)``: the rule reports a scaler built and used to scale."""
        return "scale" in facts.methods and bool(facts.calls_to(GRAD_SCALERS))
    what_it_does = """
Flags a `GradScaler(...)` construction (any spelling, `torch.amp`, `torch.cuda.amp`, the FSDP
sharded scaler) bound to a name whose `scale(...)` is used in the same function (or module)
when either every enabled autocast region opened there is bfloat16, or a module trained there
is cast to bfloat16 (`model.bfloat16()`, `model.to(torch.bfloat16)`) and no float16 autocast
region is opened there. Left alone: float16 autocast, a mix of float16 and bfloat16 regions, a dtype chosen at run time, and a scaler with
any `enabled=` expression (tied to the dtype: `enabled=dtype == torch.float16`)."""
    why_bad = """
Loss scaling exists because float16's exponent range is narrow: small gradients underflow to
zero. bfloat16 has float32's exponent range, so with bfloat16 autocast the scaler only
multiplies and divides for nothing, and its overflow checks may skip steps. With bfloat16
parameters (hence bfloat16 gradients) `scaler.unscale_`/`scaler.step` raise on CUDA:
`"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for 'BFloat16'`."""
    flagged = (
        '''def train(model, batches, opt, device):
    scaler = torch.amp.GradScaler(device.type)  # expect: DEV209
    for x, y in batches:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = (model(x) - y).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
''',
    )
    clean = (
        '''def train(model, batches, opt, device):
    for x, y in batches:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()


def train_any(model, batches, opt, device, dtype):
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    for x, y in batches:
        with torch.autocast(device.type, dtype=dtype):
            loss = (model(x) - y).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
''',
    )
    fix_safety = "This rule has no autofix."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._scalers: dict[int, list[tuple[str, Site]]] = {}
        self._casts: dict[int, int] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if not isinstance(value, cst.Call) or self.ctx.resolve(value.func) not in GRAD_SCALERS:
            return
        positional = [a for a in value.args if a.keyword is None]
        if any(a.star for a in value.args) or len(positional) > 5:
            return
        if any(a.keyword is not None and a.keyword.value == "enabled" and dotted(a.value) != "True" for a in value.args):
            return
        frame = self.amp.frame
        for target in node.targets:
            name = dotted(target.target)
            if name is not None and frame is not None:
                self._scalers.setdefault(id(frame), []).append((name, Site(value, self.ctx.statement_index)))

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.amp.frame
        if frame is not None and casts_to_bfloat16(node, self.amp) and self.amp.is_module(node.func.value):
            self._casts[id(frame)] = self._casts.get(id(frame), 0) + 1

    def check(self, frame: Frame) -> None:
        built = self._scalers.pop(id(frame), [])
        casts = self._casts.pop(id(frame), 0)
        if not built:
            return
        regions = [r for r, _ in frame.regions if r.active]
        all_bf16 = bool(regions) and all(r.dtype == "bfloat16" for r in regions)
        trains = any(e.kind == "backward" for e in frame.events)
        cast_trained = casts and trains and not any(r.float16 for r in regions)
        if not (all_bf16 or cast_trained):
            return
        used = {e.scaler for e in frame.of("scale")}
        for name, site in built:
            if name in used:
                self.report_at(site)
