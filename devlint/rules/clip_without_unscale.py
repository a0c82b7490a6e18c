"""DEV205: gradient clipping on scaled gradients."""

from __future__ import annotations

from ..amp import CLIPS, Frame, FrameRule
from ..rule import NodeFix


class ClipWithoutUnscale(FrameRule):
    """Gradient clipping after `scaler.scale(loss).backward()` without `scaler.unscale_(optimizer)`."""

    code = "DEV205"
    name = "clip-without-unscale"
    message = "gradients clipped while scaled: call scaler.unscale_(optimizer) first"
    triggers = ("clip_grad",)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a gradient clip and a ``.scale(...)`` call."""
        return "scale" in facts.methods and bool(facts.calls_to(CLIPS))

    what_it_does = """
Flags `torch.nn.utils.clip_grad_norm_`/`clip_grad_value_` (any import spelling) called after
a scaled backward (`scaler.scale(loss).backward()`) in the same scope when no
`scaler.unscale_(optimizer)` runs between that backward and the clip. Clipping without a
scaler, bf16 training, and clipping on the other arm of an `if` from the scaled path are left
alone."""
    why_bad = """
After a scaled backward the gradients are multiplied by the scale factor (65536 by default):
`max_norm=1.0` then clips them to a norm of 1/65536 once the scaler divides them, so the
model barely learns, and the clip threshold changes whenever the scale does."""
    flagged = (
        '''from torch.nn.utils import clip_grad_norm_


def train_step(model, opt, scaler, x):
    scaler.scale(model(x).mean()).backward()
    clip_grad_norm_(model.parameters(), 1.0)  # expect: DEV205
    scaler.step(opt)
    scaler.update()
''',
    )
    clean = (
        '''from torch.nn.utils import clip_grad_norm_


def train_step(model, opt, scaler, x):
    scaler.scale(model(x).mean()).backward()
    scaler.unscale_(opt)
    clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()


def plain_step(model, opt, x):
    model(x).mean().backward()
    clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
''',
    )
    fix_safety = """
The fix is safe: it inserts `scaler.unscale_(optimizer)` on the line before the clip, which
is what the clip threshold was written for; `scaler.step` then skips its own unscale. It is
offered only when one scaler and one optimizer are stepped after the clip in that scope, no
`unscale_` of that scaler is there already (a second one raises `RuntimeError`), and the clip
is a statement of its own line."""

    def check(self, frame: Frame) -> None:
        amp = self.amp
        scaled = [e for e in frame.of("backward") if e.scaled]
        unscales = list(frame.of("unscale"))
        for clip in frame.of("clip"):
            before = [b for b in scaled if b.order < clip.order and amp.compatible(b, clip)]
            if not before:
                continue
            last = before[-1].order
            if not any(last < u.order < clip.order and amp.compatible(u, clip) for u in unscales):
                self.report_at(clip, fix=self._fix(frame, clip, unscales))

    def _fix(self, frame: Frame, clip, unscales) -> NodeFix | None:
        """Insert ``scaler.unscale_(optimizer)`` before the clip when both are unambiguous."""
        steps = {(s.scaler, s.target) for s in frame.of("step") if s.order > clip.order and self.amp.compatible(s, clip)}
        where = self.statement_of(clip.node)
        if len(steps) != 1 or where is None:
            return None
        scaler, optimizer = steps.pop()
        if optimizer is None or any(u.scaler == scaler for u in unscales):
            return None
        line = f"{scaler}.unscale_({optimizer})"
        return NodeFix(f"insert {line} before the clip", ((where[0], lambda source, indent: f"{line}\n{indent}{source}"),))
