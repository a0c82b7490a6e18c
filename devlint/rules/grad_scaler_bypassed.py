"""DEV203: a GradScaler in use, but the optimizer steps directly or a loss is not scaled."""

from __future__ import annotations

import ast

from ..amp import GRAD_SCALERS, Frame, FrameRule
from ..precheck import dotted


class GradScalerBypassed(FrameRule):
    """With a GradScaler in use, `optimizer.step()` called directly or a loss back-propagated unscaled."""

    code = "DEV203"
    name = "grad-scaler-bypassed"
    message = "{what} bypasses the GradScaler: {fix}"
    triggers = ("scale",)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: ``<x>.scale(...)`` on something named like a scaler (or in a file that
        builds a GradScaler), or a ``.scale(...)`` whose result is back-propagated; and a
        ``.backward()`` or a ``.step(...)``."""
        scales = [c for c in facts.methods.get("scale", ()) if c.args or c.keywords]
        if not scales or not ("backward" in facts.methods or "step" in facts.methods or "backward" in facts.functions):
            return False
        if any("scaler" in (dotted(c.func.value) or "").rsplit(".", 1)[-1].lower() for c in scales):
            return True
        if any(c.func.value.__class__ is ast.Call and c.func.value in scales for c in facts.methods.get("backward", ())):
            return True
        return facts.refers_to(GRAD_SCALERS) or bool(facts.modules & {"torch.cuda.amp", "torch.amp", "torch.cpu.amp"})
    what_it_does = """
In a scope (function or module) where a GradScaler scales a loss (`scaler.scale(loss)`),
flags `optimizer.step()` called directly on an optimizer tied to the scaled loss (one passed to
`scaler.step`/`scaler.unscale_` in that scope, any optimizer when the scope never calls
`scaler.step`, or one whose `zero_grad()` and `step()` enclose a scaled backward and no
unscaled one, as a GAN's generator next to `scaler.step(optimizer_d)`), and `loss.backward()` (or `torch.autograd.backward(loss)`) on a loss that was
not scaled. Code on the other arm of an `if` that chooses between the AMP and the plain path
(`if scaler is not None: ... else: ...`, also split over two `if` statements testing the same
condition, and any arm whose other arm uses a scaler, as a GAN's two `if` statements with one
scaler each) is left alone, as are optimizers not tied to the scaled loss, learning-rate
schedulers, and code that runs before the scope builds its GradScaler (a script's plain fp32
baseline loop ahead of `scaler = torch.amp.GradScaler()`)."""
    why_bad = """
`scaler.scale(loss).backward()` leaves gradients multiplied by the scale factor (65536 by
default): `optimizer.step()` then applies updates tens of thousands of times too large, and
skips neither inf nor NaN gradients. An unscaled `loss.backward()` next to a scaler loses the
protection against float16 underflow that the scaler was added for."""
    flagged = (
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler(dev)
with torch.autocast(dev, dtype=torch.float16):
    loss = model(torch.randn(4, 8, device=dev)).mean()
scaler.scale(loss).backward()
opt.step()  # expect: DEV203
''',
        '''def train(model, opt, scaler, batches):
    for x in batches:
        aux = model(x).abs().mean()
        aux.backward(retain_graph=True)  # expect: DEV203
        scaler.scale(model(x).mean()).backward()
        scaler.step(opt)
        scaler.update()
''',
    )
    clean = (
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 10)
scaler = torch.amp.GradScaler(dev)
with torch.autocast(dev, dtype=torch.float16):
    loss = model(torch.randn(4, 8, device=dev)).mean()
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
sched.step()
''',
        '''def step(model, opt, loss, scaler=None):
    if scaler is not None:
        scaler.scale(loss).backward()
    else:
        loss.backward()
    if scaler:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()


def gan_step(state, disc_loss):
    if state.amp and state.g_scaler is not None:
        with torch.autocast("cuda" if torch.cuda.is_available() else "cpu"):
            gen_loss = state.generator_loss()
        state.g_scaler.scale(gen_loss).backward()
        state.g_scaler.step(state.g_opt)
        state.g_scaler.update()
    else:
        gen_loss = state.generator_loss()
        gen_loss.backward()
        state.g_opt.step()
    if state.amp and state.d_scaler is not None:
        state.d_scaler.scale(disc_loss).backward()
        state.d_scaler.step(state.d_opt)
        state.d_scaler.update()
    else:
        disc_loss.backward()
        state.d_opt.step()
''',
    )
    fix_safety = "This rule has no autofix."

    def check(self, frame: Frame) -> None:
        amp = self.amp
        scaled = [e for e in frame.events if e.kind == "scale" or (e.kind == "backward" and e.scaled)]
        if not scaled:
            return
        steps = list(frame.of("step"))
        scaler = next((e.scaler for e in frame.events if e.scaler), "scaler")
        tied = {e.target for e in frame.events if e.kind in ("step", "unscale") and e.target}
        for event in frame.events:
            if event.kind in ("opt_step", "backward") and (_before_scaler(frame, event) or _other_arm_scales(frame, event)):
                continue
            if event.kind == "opt_step":
                if steps and event.target not in tied and not _brackets_scaled_backward(frame, event, amp):
                    continue
                if any(amp.compatible(event, s) for s in scaled + steps):
                    self.report_at(
                        event,
                        self.fitted(*(self.message.format(what=f"{event.target}.step()", fix=fix) for fix in (
                            f"call {scaler}.step({event.target}) then {scaler}.update()",
                            f"call {scaler}.step({event.target})", "use the scaler's step()"))),
                    )
            elif event.kind == "backward" and not event.scaled:
                if any(amp.compatible(event, s) for s in scaled):
                    self.report_at(event, self.fitted(*(self.message.format(what="an unscaled backward()", fix=fix) for fix in (
                        f"call {scaler}.scale(loss).backward()", "scale the loss first"))))


def _other_arm_scales(frame: Frame, event) -> bool:
    """Does ``event`` sit on one arm of an ``if`` whose other arm uses the scaler (``if
    scaler is not None: scaler.scale(loss).backward() ... else: loss.backward()``)? That arm
    is the path without a scaler, written out by the author, whatever the test says."""
    arms = {id(node): arm for node, arm in event.path}
    for other in frame.events:
        if other.kind in ("scale", "step", "unscale") or (other.kind == "backward" and other.scaled):
            if any(arms.get(id(node), arm) != arm for node, arm in other.path):
                return True
    return False


def _before_scaler(frame: Frame, event) -> bool:
    """Does ``event`` run before the frame builds the scaler(s) it scales with (the plain loop
    of a script that only later constructs ``scaler = GradScaler()``)? Only where every
    scaler of the frame's ``scale`` calls is built in the frame, and not in a loop that also
    holds the construction."""
    names = {e.scaler for e in frame.of("scale")}
    if not names or not names <= frame.built.keys():
        return False
    order, loops = min(frame.built[n] for n in names)
    return event.order < order and not set(event.loops) & set(loops)


def _brackets_scaled_backward(frame: Frame, event, amp) -> bool:
    """``opt.zero_grad()``, then a scaled backward and no unscaled one, then ``opt.step()``:
    the optimizer is tied to the scaled loss even though ``scaler.step`` only names another
    one (a GAN's generator step next to ``scaler.step(optimizer_d)``)."""
    zeros = [z.order for z in frame.of("zero_grad") if z.target == event.target and z.order < event.order and amp.compatible(z, event)]
    if not zeros:
        return False
    between = [e for e in frame.events if max(zeros) < e.order < event.order and amp.compatible(e, event)]
    return any(e.kind == "scale" for e in between) and not any(e.kind == "backward" and not e.scaled for e in between)
