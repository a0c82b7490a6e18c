"""DEV207: ``scaler.unscale_(opt)`` that can run twice for one ``scaler.update()``."""

from __future__ import annotations

from ..amp import Frame, FrameRule


_ACCUMULATION_WORDS = ("accum", "sync_grad", "sync_gradients", "gradient_accumulation", "update_freq", "micro")


def _accumulates(amp, test) -> bool:
    """Does an ``if`` test read as a gradient-accumulation boundary: a modulo
    (``(i + 1) % accum == 0``) or a name about accumulation (``is_accumulating``, ``sync_gradients``)?"""
    text = amp._printer.code_for_node(test).lower()
    return "%" in text or any(w in text for w in _ACCUMULATION_WORDS)


class UnscaleMoreThanOnce(FrameRule):
    """`scaler.unscale_(optimizer)` on every pass of a loop whose `scaler.update()` is conditional."""

    code = "DEV207"
    name = "unscale-more-than-once"
    message = (
        "{scaler}.unscale_() runs on every pass but {scaler}.update() only under a condition, so the second pass "
        "raises \"unscale_() has already been called\": unscale under the same condition as {scaler}.step()"
    )
    triggers = ("unscale_",)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: calls ``<expr>.unscale_(...)`` and ``<expr>.update(...)`` (the scaler's
        events), and a ``%`` or a word about accumulation somewhere (the ``if`` test
        :func:`_accumulates` wants)."""
        if "unscale_" not in facts.methods or "update" not in facts.methods:
            return False
        lowered = facts.text.lower()
        return "%" in lowered or any(w in lowered for w in _ACCUMULATION_WORDS)
    what_it_does = """
Flags `scaler.unscale_(optimizer)` inside a loop when the same scaler's `update()` sits in the
same loop body under a gradient-accumulation condition that does not also hold the `unscale_`
(a modulo or a name about accumulation: `if (i + 1) % accum == 0: scaler.step(opt);
scaler.update()` after an unconditional `unscale_` and clip). Left alone: `unscale_` under the same condition as
`step`/`update`, an `update()` that runs on every pass (also one on each arm of an `if`),
loops over several optimizers, data-dependent conditions (`if grad_norm < limit:`), and any `update()` outside the loop (DEV204's case)."""
    why_bad = """
`unscale_` divides the gradients by the scale once per `update()`; a second call for the same
optimizer before `update()` raises `RuntimeError: unscale_() has already been called on this
optimizer since the last update()`. With an unconditional `unscale_` and a conditional update,
the second micro-step of every accumulation window crashes."""
    flagged = (
        '''def train(model, opt, scaler, batches, accum=4):
    for i, x in enumerate(batches):
        scaler.scale(model(x).mean() / accum).backward()
        scaler.unscale_(opt)  # expect: DEV207
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if (i + 1) % accum == 0:
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
''',
    )
    clean = (
        '''def train(model, opt, scaler, batches, accum=4):
    for i, x in enumerate(batches):
        scaler.scale(model(x).mean() / accum).backward()
        if (i + 1) % accum == 0:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
''',
    )
    fix_safety = "This rule has no autofix."

    def check(self, frame: Frame) -> None:
        updates = list(frame.of("update"))
        for unscale in frame.of("unscale"):
            if not unscale.loops:
                continue
            mine = [u for u in updates if u.scaler == unscale.scaler and u.loops == unscale.loops]
            depth = len(unscale.path)
            if not mine or any(u.path == unscale.path[: len(u.path)] for u in mine):
                continue  # no update in this loop body, or one that runs whenever unscale_ does
            deeper = [u for u in mine if len(u.path) > depth and u.path[:depth] == unscale.path]
            if not deeper or len(deeper) != len(mine):
                continue  # the updates sit on conditions unrelated to the unscale_: unsure
            arms: dict[int, set[int]] = {}
            tests = []
            for u in deeper:
                node, arm = u.path[depth]
                arms.setdefault(id(node), set()).add(arm)
                tests.append(node.test)
            if any(len(a) > 1 for a in arms.values()):
                continue  # an update on both arms of one `if`
            if not all(_accumulates(self.amp, t) for t in tests):
                continue  # `if grad_norm < limit:` and other data-dependent skips: not this rule's case
            self.report_at(unscale, self.message.format(scaler=unscale.scaler))
