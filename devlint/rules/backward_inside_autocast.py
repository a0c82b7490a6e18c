"""DEV201: ``.backward()`` inside an autocast region."""

from __future__ import annotations

import libcst as cst

from .. import edits
from ..amp import Frame, FrameRule
from ..autocast import AUTOCAST
from ..precheck import has_backward
from ..rule import NodeFix


class BackwardInsideAutocast(FrameRule):
    """`.backward()` called inside an enabled autocast region."""

    walk_logs = ("withs",)  # id(the with's item) -> the with, read for the frame being judged

    code = "DEV201"
    name = "backward-inside-autocast"
    message = "backward() under autocast: move it after the `with` block"
    triggers = ("autocast",)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a backward and a name that may be autocast (called, or bound and
        entered later: `partial(torch.autocast, ...)`)."""
        return has_backward(facts) and facts.refers_to(AUTOCAST)

    what_it_does = """
Flags `.backward()` (also `scaler.scale(loss).backward()` and `torch.autograd.backward(...)`)
lexically inside an enabled autocast region: a `with torch.autocast(...)` block (any
spelling: `torch.amp.autocast`, `torch.cuda.amp.autocast`, `torch.cpu.amp.autocast`, a bare
imported `autocast`, also among several `with` items) or a function decorated with one, also
through a context manager held in a variable (`ctx = torch.autocast(...)`, or chosen on either
arm of an `if` or conditional expression with `nullcontext()` on the other, then `with ctx:`;
`self.ctx` set in another method counts too), a factory of one (`functools.partial(torch.autocast,
...)`, `torch.autocast if use_amp else nullcontext`, entered as `with ctx():`), or a function of
the file that returns an autocast context or is a `@contextmanager` yielding inside one
(`with maybe_autocast():`). A region with a literal `enabled=False`, and a
nested `autocast(enabled=False)` block, are left alone."""
    why_bad = """
Autocast should wrap only the forward pass and the loss. Backward ops run in the dtype autocast
chose for the matching forward ops anyway; running backward under autocast is not recommended
by the PyTorch AMP docs and can cast gradients to a lower precision than intended."""
    flagged = (
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 1).to(dev)
scaler = torch.amp.GradScaler(dev)
x = torch.randn(4, 8, device=dev)
with torch.autocast(dev, dtype=torch.float16):
    loss = model(x).mean()
    scaler.scale(loss).backward()  # expect: DEV201
''',
        '''from contextlib import nullcontext

dev = "cuda" if torch.cuda.is_available() else "cpu"
ctx = nullcontext() if dev == "cpu" else torch.autocast(dev, dtype=torch.bfloat16)
model = nn.Linear(8, 1).to(dev)
with ctx:
    loss = model(torch.randn(4, 8, device=dev)).mean()
    loss.backward()  # expect: DEV201
''',
        '''from torch.cpu.amp import autocast  # expect: DEV206

model = nn.Linear(8, 1)


@autocast()  # expect: DEV206
def train_step(x):
    loss = model(x).mean()
    loss.backward()  # expect: DEV201
''',
    )
    clean = (
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 1).to(dev)
scaler = torch.amp.GradScaler(dev)
x = torch.randn(4, 8, device=dev)
with torch.autocast(dev, dtype=torch.float16):
    loss = model(x).mean()
scaler.scale(loss).backward()
''',
        '''model = nn.Linear(8, 1)
x = torch.randn(4, 8)
with torch.autocast("cpu", enabled=False):
    model(x).mean().backward()
with torch.autocast("cpu"):
    out = model(x)
    with torch.autocast("cpu", enabled=False):
        out.float().mean().backward()
''',
    )
    fix_safety = """
The fix is unsafe: it moves the backward statement out of the `with` block, to just after
it, so the backward pass no longer runs under autocast. It is offered only when the backward
is the last statement of a one-item `with torch.autocast(...)` block that holds other
statements too; elsewhere which statements end the region is the author's choice."""

    def visit_With(self, node: cst.With) -> None:
        if len(node.items) == 1:
            self.__dict__.setdefault("withs", {})[id(node.items[0].item)] = node

    def check(self, frame: Frame) -> None:
        for event in frame.of("backward"):
            if event.region is not None:
                self.report_at(event, fix=self._fix(event))

    def _fix(self, event) -> NodeFix | None:
        """Dedent a trailing ``loss.backward()`` out of its ``with autocast(...)`` block."""
        block = self.__dict__.get("withs", {}).get(id(event.region.node))
        where = self.statement_of(event.node)
        if block is None or where is None or not isinstance(block.body, cst.IndentedBlock):
            return None
        body = block.body.body
        if len(body) < 2 or body[-1] is not where[1]:
            return None
        statement = edits.code(where[0])

        def dedent(source: str, indent: str) -> str | None:
            head = source[: len(source) - len(statement)].rstrip(" \t")
            if not source.endswith(statement) or not head.endswith("\n"):
                return None
            return f"{head}{indent}{statement}"

        return NodeFix("move the backward after the with block", ((block, dedent),), safe=False)
