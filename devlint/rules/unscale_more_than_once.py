"""DEV207: ``scaler.unscale_(opt)`` that can run twice for one ``scaler.update()``."""

from __future__ import annotations

import libcst as cst

from ..amp import Frame, FrameRule
from ..names import dotted

_ACCUMULATION_WORDS = ("accum", "sync_grad", "sync_gradients", "gradient_accumulation", "update_freq", "micro")
#: calls that read a configuration without changing between passes
_PURE_CALLS = frozenset({"len", "getattr", "hasattr", "isinstance", "bool", "int", "float", "get"})


def _accumulates(amp, test, bound: dict | None = None) -> bool:
    """Does an ``if`` test read as a gradient-accumulation boundary: a modulo
    (``(i + 1) % accum == 0``) or a name about accumulation (``is_accumulating``, ``sync_gradients``)?
    A name the loop assigns counts by its value (``boundary = step % accum == 0``)."""
    code = amp._printer.code_for_node
    texts = [code(test)]
    if bound:
        stack = [test]
        while stack:
            node = stack.pop()
            if node.__class__ is cst.Name:
                texts += [code(v) for v in bound.get(node.value, ()) if v is not None]
            stack.extend(node.children)
    text = " ".join(texts).lower()
    return "%" in text or any(w in text for w in _ACCUMULATION_WORDS)


def _bound_in(loop: cst.CSTNode) -> dict[str, list]:
    """Dotted names (``step``, ``self.step``) that the loop binds, each with the values a plain
    assignment gives it (``None`` for another binding): its targets and every assignment,
    augmented assignment, ``with ... as`` and inner loop target in its body."""
    bound: dict[str, list] = {}
    stack = [loop]
    while stack:
        node = stack.pop()
        t = node.__class__
        targets, value = (), None
        if t is cst.For:
            targets = (node.target,)
        elif t is cst.Assign:
            targets, value = tuple(a.target for a in node.targets), node.value
        elif t is cst.AugAssign or t is cst.AnnAssign:
            targets = (node.target,)
        elif t is cst.WithItem and node.asname is not None:
            targets = (node.asname.name,)
        elif t is cst.NamedExpr:
            targets, value = (node.target,), node.value
        for target in targets:
            plain = not isinstance(target, (cst.Tuple, cst.List))
            elements = [target] if plain else [e.value for e in target.elements]
            for name in filter(None, map(dotted, elements)):
                bound.setdefault(name, []).append(value if plain else None)
        stack.extend(node.children)
    return bound


def _varying(test: cst.BaseExpression, bound: dict) -> bool:
    """Can an ``if`` test inside the loop change from one pass to the next? Yes when it reads a
    name the loop binds (``if (i + 1) % accum == 0``, ``if is_last:``), holds a ``%`` or a call
    (``if should_step():``), or is a flag named after an accumulation boundary
    (``if accelerator.sync_gradients:``). A configuration test (``if cfg.clip_grad:``,
    ``if accum > 1:``, ``if max_norm is not None:``) holds for the whole loop."""
    flag = test
    while flag.__class__ is cst.UnaryOperation:
        flag = flag.expression
    name = dotted(flag)
    if name is not None and any(w in name.rsplit(".", 1)[-1].lower() for w in _ACCUMULATION_WORDS):
        return True
    stack = [test]
    while stack:
        node = stack.pop()
        t = node.__class__
        if t is cst.Modulo:
            return True
        if t is cst.Call:
            if (dotted(node.func) or "").rsplit(".", 1)[-1] not in _PURE_CALLS:
                return True  # `cfg.get("clip")`, `len(x)`: pure; their receiver and arguments are read on
        elif t is cst.Name or t is cst.Attribute:
            name = dotted(node)
            if name is not None:
                parts = name.split(".")
                if any(".".join(parts[: i + 1]) in bound for i in range(len(parts))):
                    return True
                continue
        stack.extend(node.children)
    return False


class UnscaleMoreThanOnce(FrameRule):
    """`scaler.unscale_(optimizer)` on every pass of a loop whose `scaler.update()` is conditional."""

    code = "DEV207"
    name = "unscale-more-than-once"
    message = "{scaler}.unscale_() every pass, update() conditional: unscale with step"
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
scaler.update()` after an unconditional `unscale_` and clip; also a name the loop assigns
from such a test, `boundary = step % accum == 0`). An `unscale_` under a
configuration test that holds for the whole loop (`if cfg.clip_grad:`, `if max_norm > 0:`: it
reads nothing the loop binds) still runs on every pass when it holds, and so does the
accumulating arm of `if accum > 1: <update every accum passes> else: <update every pass>`:
both are flagged. Left alone: `unscale_` under the same condition as `step`/`update`, an
`update()` that runs on every pass (also one on each arm of an `if` that changes between
passes), loops over several optimizers, data-dependent conditions (`if grad_norm < limit:`),
and any `update()` outside the loop (DEV204's case)."""
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
        '''def train(model, opt, scaler, batches, cfg):
    for i, x in enumerate(batches):
        scaler.scale(model(x).mean() / cfg.accum).backward()
        if cfg.clip_grad:
            scaler.unscale_(opt)  # expect: DEV207
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad)
        if (i + 1) % cfg.accum == 0:
            scaler.step(opt)
            scaler.update()
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
            mine = [
                u for u in updates
                if u.scaler == unscale.scaler and u.loops == unscale.loops and self.amp.compatible(unscale, u)
            ]
            if not mine or any(u.path == unscale.path[: len(u.path)] for u in mine):
                continue  # no update in this loop body, or one that runs whenever unscale_ does
            loop = self.amp.loop_nodes.get(unscale.loops[-1])
            bound = _bound_in(loop) if loop is not None else {}
            if not any(_varying(node.test, bound) for node, _ in unscale.path):
                if self._every_pass(unscale, mine, bound):
                    self.report_at(unscale, self.fitted(self.message.format(scaler=unscale.scaler), self.message.format(scaler="scaler")))
                continue
            depth = len(unscale.path)
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
            if not all(_accumulates(self.amp, t, bound) for t in tests):
                continue  # `if grad_norm < limit:` and other data-dependent skips: not this rule's case
            self.report_at(unscale, self.fitted(self.message.format(scaler=unscale.scaler), self.message.format(scaler="scaler")))

    def _every_pass(self, unscale, updates, bound: dict) -> bool:
        """``unscale_`` runs on every pass of the loop (its tests hold for the whole loop): is
        there a setting of the other whole-loop tests (``if accum > 1:``) under which every
        ``update()`` that can run waits on an accumulation test that changes between passes?"""
        amp = self.amp

        def fixed(event) -> dict[str, int]:
            arms = {}
            for node, arm in event.path:
                if not _varying(node.test, bound):
                    key, positive = amp.condition(node.test)
                    arms[key] = arm if positive else 1 - arm
            return arms

        settings = [fixed(u) for u in updates]
        for u, setting in zip(updates, settings):
            tests = [node for node, _ in u.path if _varying(node.test, bound)]
            if not tests or not all(_accumulates(amp, t, bound) for t in tests):
                continue  # an update that runs every pass in this setting, or a data-dependent one
            live = [v for v, other in zip(updates, settings) if all(setting.get(k, a) == a for k, a in other.items())]
            arms: dict[int, set[int]] = {}
            safe = False
            for v in live:
                varying = [(node, arm) for node, arm in v.path if _varying(node.test, bound)]
                if not varying or not all(_accumulates(amp, node.test, bound) for node, _ in varying):
                    safe = True  # runs every pass here, or on a test this rule cannot read
                for node, arm in varying:
                    arms.setdefault(id(node), set()).add(arm)
            if not safe and not any(len(a) > 1 for a in arms.values()):
                return True
        return False
