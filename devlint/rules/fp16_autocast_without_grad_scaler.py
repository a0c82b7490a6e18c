"""DEV202: float16 autocast whose loss is back-propagated without a GradScaler."""

from __future__ import annotations

from ..amp import Frame, FrameRule
from ..autocast import AUTOCAST
from ..precheck import has_backward


class Fp16AutocastWithoutGradScaler(FrameRule):
    """A float16 autocast region whose loss is back-propagated without a GradScaler."""

    code = "DEV202"
    name = "fp16-autocast-without-grad-scaler"
    message = "float16 autocast without a GradScaler: gradients underflow; add a scaler"
    triggers = ("autocast",)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a backward and a name that may be autocast (called, or bound and
        entered later: `partial(torch.autocast, ...)`)."""
        return has_backward(facts) and facts.refers_to(AUTOCAST)

    what_it_does = """
Flags a float16 autocast region (`dtype=torch.float16`/`torch.half`, or no dtype on CUDA:
`torch.autocast("cuda")`, `torch.cuda.amp.autocast()`) in a scope (function or module) that
calls `.backward()` after opening it while no GradScaler scales any loss in that scope. The
finding is on the autocast call (the `with` item or the decorator). Left alone:
`dtype=torch.bfloat16` (and the CPU default, bfloat16); a dtype held in a variable (unknown,
unless the device type is a literal `"cuda"`); inference (no backward in the scope). A device
type held in an expression with no dtype (`torch.autocast(device_type=device.type)`,
`str(device)`) is float16 wherever that device is CUDA, so it counts as float16; a scope where a scaler held elsewhere (`self.scaler`, a parameter named like a
scaler) wraps the loss with `.scale(...)`, or that steps the optimizer through a scaler
(`self.scaler.step(optimizer)`: the loss is scaled out of sight, e.g. by a backward callback); `enabled=False`; a backward on the other arm of the
`if` that opens the region (`if use_amp: with autocast(...): ... else: loss.backward()`), which
never runs after it. A context manager bound to an autocast call (`ctx = torch.autocast(...)`,
also on one arm of an `if` with `nullcontext()` on the other) opens the region at `with ctx:`,
where the finding is then reported."""
    why_bad = """
float16 has a narrow exponent range: gradients smaller than about 6e-8 flush to zero, so
parts of the model silently stop learning. `GradScaler` multiplies the loss before backward
and divides the gradients before the step (skipping steps with inf/NaN) to avoid this;
bfloat16 has float32's range and needs no scaler."""
    flagged = (
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.autocast(dev, dtype=torch.float16):  # expect: DEV202
    loss = model(torch.randn(4, 8, device=dev)).mean()
loss.backward()
opt.step()
''',
        '''def train_step(model, x, opt, device):
    with torch.autocast(device_type=device.type):  # expect: DEV202
        loss = model(x).mean()
    loss.backward()
    opt.step()
''',
    )
    clean = (
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler(dev)
with torch.autocast(dev, dtype=torch.float16):
    loss = model(torch.randn(4, 8, device=dev)).mean()
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
''',
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.autocast(dev, dtype=torch.bfloat16):
    loss = model(torch.randn(4, 8, device=dev)).mean()
loss.backward()
opt.step()


@torch.no_grad()
def predict(x):
    with torch.autocast(dev, dtype=torch.float16):
        return model(x)


def train_step(x, grad_scaler):
    with torch.autocast(dev, dtype=torch.float16):
        loss = model(x).mean()
    grad_scaler.scale(loss).backward()


class Trainer:
    def step(self, x):
        with torch.autocast(dev, dtype=torch.float16):
            loss = model(x).mean()
        if self.scaler is not None:
            self.backward_callback(self, loss)  # scales the loss and calls backward
        else:
            loss.backward()
        self.scaler.step(opt)
        self.scaler.update()
''',
    )
    fix_safety = "This rule has no autofix: adding a GradScaler changes the step and the update."

    def check(self, frame: Frame) -> None:
        if any(e.kind in ("scale", "step", "unscale") or (e.kind == "backward" and e.scaled) for e in frame.events):
            return  # a scaler steps the optimizer here: the loss is scaled where it cannot be seen (a callback)
        backwards = list(frame.of("backward"))
        for region, order in frame.regions:
            if region.active and region.maybe_float16 and any(
                b.order > order and self.amp.compatible(region, b) for b in backwards
            ):
                self.report_at(region)
