"""DEV204: ``scaler.step(...)`` without ``scaler.update()``."""

from __future__ import annotations

import re

from ..amp import GRAD_SCALERS, Frame, FrameRule
from ..precheck import dotted
from ..rule import NodeFix

#: ``self.<attr>...`` followed by ``.update(``, wherever it starts (inside ``myself.s...`` too)
_DOTTED = re.compile(r"self(?:\.\w+)+")
_OBJECT_UPDATE = re.compile(r"(?=(self(?:\.\w+)+)\.update\()")
#: the run of word characters and dots that ends where a window ends
_RUN_END = re.compile(r"[\w.]*\Z")


def object_updates(text: str) -> frozenset[str]:
    """Every dotted ``self.a.b`` that ``text`` calls ``.update(`` on: the names
    ``_OBJECT_UPDATE`` finds (``(?=(self(?:\\.\\w+)+)\\.update\\()`` at every position),
    found from each ``.update(`` and the run of word characters and dots before it instead of
    trying the pattern at every position of the text (8 ms on a 250 KB file)."""
    found = set()
    at = text.find(".update(")
    while at >= 0:
        window = 256
        while True:  # where the run of word characters and dots before ``.update(`` starts
            low = max(0, at - window)
            start = _RUN_END.search(text, low, at).start()
            if start > low or low == 0:
                break
            window *= 4
        run = text[start:at]
        k = run.find("self")
        while k >= 0:
            if _DOTTED.fullmatch(run, k):
                found.add(run[k:])
            k = run.find("self", k + 1)
        at = text.find(".update(", at + 8)
    return frozenset(found)


class GradScalerUpdateMissing(FrameRule):
    """`scaler.step(optimizer)` with no `scaler.update()` in the same loop body or function."""

    code = "DEV204"
    name = "grad-scaler-update-missing"
    message = "scaler.step() without update(): call {scaler}.update() after the step"
    triggers = (".step(",)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: ``<x>.step(...)`` with an argument, on something named like a scaler or in a
        file that builds a GradScaler."""
        steps = [c for c in facts.methods.get("step", ()) if c.args or c.keywords]
        if not steps:
            return False
        if any("scaler" in (dotted(c.func.value) or "").rsplit(".", 1)[-1].lower() for c in steps):
            return True
        return facts.refers_to(GRAD_SCALERS)

    what_it_does = """
Flags `scaler.step(optimizer)` when the same scaler's `update()` is not called in the same
function (or module), or, for a step inside a loop, not in that loop's body. An update on
the other arm of an `if` does not count; a step and an update together under one condition
(gradient accumulation: `if (i + 1) % accum == 0:`), an update after a conditional step, and
several `scaler.step` calls (two optimizers, also `for opt in optimizers: scaler.step(opt)`
followed by one `update()` after that loop) sharing one `update()` are fine, and so is a
scaler held by the object (`self.scaler`) whose `update()` another method of the file calls
(also through an object it holds: `self.learn.scaler.update()`)."""
    why_bad = """
`update()` adjusts the scale factor and resets the scaler's per-step state. Without it the
scale never grows back after an overflow, and the next `scaler.step` raises `RuntimeError:
step() has already been called since the last update()`."""
    flagged = (
        '''def train(model, opt, scaler, batches):
    for x in batches:
        scaler.scale(model(x).mean()).backward()
        scaler.step(opt)  # expect: DEV204
        opt.zero_grad()
    scaler.update()
''',
    )
    clean = (
        '''def train(model, opt_g, opt_d, scaler, batches, accum=4):
    for i, x in enumerate(batches):
        scaler.scale(model(x).mean() / accum).backward()
        if (i + 1) % accum == 0:
            scaler.step(opt_g)
            scaler.step(opt_d)
            scaler.update()
''',
        '''def train(model, optimizers, scaler, batches):
    for x in batches:
        scaler.scale(model(x).mean()).backward()
        for opt in optimizers:
            scaler.step(opt)
        scaler.update()
''',
        '''class MixedPrecisionCallback:
    def before_backward(self):
        self.learn.loss = self.scaler.scale(self.learn.loss)

    def before_step(self):
        self.scaler.step(self.learn.opt)

    def after_step(self):
        self.learn.scaler.update()  # the learner's scaler, which self.scaler reads
''',
    )
    fix_safety = """
The fix is unsafe: it adds `scaler.update()` on the line after `scaler.step(...)`, which
changes how the loss scale evolves. It is offered only when that is the scaler's only `step`
in the scope and no `update()` of it exists anywhere there (a second `update()` with no step
between raises `RuntimeError`), and the step is a statement of its own line."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        #: every ``self.a.b`` that the text calls ``.update(`` on: the text holds
        #: ``f"{scaler}.update("`` exactly when ``scaler`` (a dotted name) is one of them. Read
        #: once, so that what a frame's check reads is state the walk can compare
        #: (:mod:`devlint.resume`), not the whole text
        self._object_updates = object_updates(ctx.text)

    def _updated_elsewhere(self, scaler: str) -> bool:
        """Does the text call ``{scaler}.update(`` (``scaler``: ``self.`` and attributes)?"""
        if _DOTTED.fullmatch(scaler):
            # also through an object it holds under the same name: self.learn.scaler.update()
            # beside self.scaler.step(self), as a training callback does with its learner's scaler
            last = scaler.rsplit(".", 1)[-1]
            return scaler in self._object_updates or any(u.rsplit(".", 1)[-1] == last for u in self._object_updates)
        self.ctx.note_read(None)  # a name the pattern does not cover: the whole text is read
        return f"{scaler}.update(" in self.ctx.text

    def check(self, frame: Frame) -> None:
        amp = self.amp
        updates = list(frame.of("update"))
        for step in frame.of("step"):
            depth = len(step.loops)
            if step.scaler.startswith("self.") and self._updated_elsewhere(step.scaler):
                continue  # a scaler of the object, updated by another method (composer's trainer)
            if not any(
                u.scaler == step.scaler and amp.compatible(step, u)
                and (u.loops[:depth] == step.loops or self._after_optimizer_loop(step, u))
                for u in updates
            ):
                self.report_at(step, self.message.format(scaler=step.scaler), self._fix(frame, step, updates))

    def _fix(self, frame: Frame, step, updates) -> NodeFix | None:
        """Add ``scaler.update()`` after the scaler's only step, where it has no update at all."""
        where = self.statement_of(step.node)
        if where is None or any(u.scaler == step.scaler for u in updates):
            return None
        if sum(1 for s in frame.of("step") if s.scaler == step.scaler) != 1:
            return None
        line = f"{step.scaler}.update()"
        return NodeFix(f"add {line} after the step", ((where[0], lambda source, indent: f"{source}\n{indent}{line}"),), safe=False)

    def _after_optimizer_loop(self, step, update) -> bool:
        """``for opt in optimizers: scaler.step(opt)`` then one ``scaler.update()`` after that
        loop (the AMP docs' multi-optimizer pattern): the loops the step sits in beyond the
        update's iterate over the stepped optimizer."""
        outer = len(update.loops)
        if update.order < step.order or step.loops[:outer] != update.loops or len(step.loops) <= outer:
            return False
        targets = self.amp.loop_targets
        return step.target is not None and all(step.target in targets.get(loop, ()) for loop in step.loops[outer:])
