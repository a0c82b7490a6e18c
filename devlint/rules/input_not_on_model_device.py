"""DEV111: a model on a device called with a tensor that never left the CPU."""

from __future__ import annotations

import ast

import libcst as cst

from ..dataflow import DTYPES, FACTORIES, DeviceFlow
from ..precheck import cpu_helpers, dotted, is_move, unit_makes_cpu_tensor, unit_moves
from ..rule import Rule


class InputNotOnModelDevice(Rule):
    """A model moved to a device is called with a tensor that is still on the CPU."""

    code = "DEV111"
    name = "input-not-on-model-device"
    message = "this call gets a CPU tensor while the model was moved to a device: move the input with .to(device) first"
    triggers = (".to(", ".cuda(")
    requires = (DeviceFlow,)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a top-level class or function (or the module's other statements) that may
        make a CPU tensor (a torch factory, ``torch.tensor``, ``from_numpy``, a tokenizer's
        ``return_tensors=``, a DataLoader anywhere, a call of a ``def`` of the module that makes
        one) and calls something it (or the module's statements) moved to a device, a loss
        module, or a functional loss."""
        units = facts.units
        if not any(unit_moves(u, DTYPES) for u in units):
            return False
        loader = "DataLoader" in facts.methods or "DataLoader" in facts.functions
        sources = [loader or "return_tensors" in u.keywords or unit_makes_cpu_tensor(u, FACTORIES) for u in units]
        helpers = cpu_helpers(facts, FACTORIES)
        shared = None
        for unit, source in zip(units, sources):
            if not (source or helpers & unit.functions.keys()):
                continue
            if shared is None:
                shared = _callees(units[0])
            callees = _callees(unit) | shared
            for table in (unit.functions, unit.methods):
                for last, calls in table.items():
                    for call in calls:
                        name = dotted(call.func)
                        if name in callees or (last in ("generate", "forward") and dotted(call.func.value) in callees):
                            return True
                        if ("loss" in last or "entropy" in last or last == "kl_div") and any(
                            n.startswith("torch.nn.functional.") for n in facts.resolve(call.func)
                        ):
                            return True
        return False
    what_it_does = """
Follows, in each function and in the module body, which names hold a model moved with
`.to(device)`/`.cuda()` and which hold tensors known to be on the CPU: a `DataLoader` batch
(`for x, y in loader`, `batch["x"]`, `next(iter(loader))`), a tokenizer's output with
`return_tensors="pt"`, `torch.from_numpy(...)`, `torch.tensor([...])`, a factory call without
`device=`, or a function of the same module whose every `return` is such a tensor (or a dict or
tuple of them). It flags the call of the moved model (or of a loss on the model's output) that
receives one of them, including through `**batch` and `*batch`.

Tensors moved with `.to(device)` (also `{k: v.to(device) for k, v in batch.items()}` and
`batch.to(device)`), created with `device=`, produced by the model, or returned by a helper the
linter cannot see into are left alone, as are function parameters, Lightning `LightningModule`
methods and code that uses `accelerate` (`accelerator.prepare`), which place the data
themselves. A tensor put on the CPU on purpose with `.cpu()` is DEV103's finding."""
    why_bad = """
The model's parameters live on the GPU and the input on the CPU, so the first layer raises
`RuntimeError: Expected all tensors to be on the same device, but found at least two devices,
cuda:0 and cpu!` on a GPU box, while the same script passes on a laptop CPU where both are on
the CPU."""
    flagged = (
        '''from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4)
for x, y in loader:
    out = model(x)  # expect: DEV111
''',
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
loss_fn = nn.CrossEntropyLoss()
x = torch.randn(3, 4).to(device)
y = torch.tensor([0, 1, 1])
loss = loss_fn(model(x), y)  # expect: DEV111
''',
        '''def make_batch():
    return {"x": torch.randn(2, 4)}


class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, x):
        return self.lin(x)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
net = Wrapper().to(device)
batch = make_batch()
out = net(**batch)  # expect: DEV111
''',
    )
    clean = (
        '''from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = nn.functional.cross_entropy(model(x), y)
''',
        '''def train(model, loader, device):
    model.to(device)
    for batch in loader:  # a parameter: the linter cannot tell what it yields
        model(batch["x"])
''',
    )
    fix_safety = "This rule has no autofix: where to move the data (and whether non_blocking applies) is the author's choice."

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.analysis(DeviceFlow).receives_cpu(node):
            self.report(node)


def _callees(unit) -> set[str]:
    """Pre-check on the stdlib ``ast``: dotted names a unit binds to something moved to a
    device or to a loss (``model = Net().to(device)``, ``model.cuda()``, ``self.crit = nn.MSELoss()``),
    and the names it copies them to."""
    found: set[str] = set()
    copies = []
    for node in unit.walk():
        t = node.__class__
        if t is ast.Assign or t is ast.AnnAssign:
            value = node.value
            if value is None:
                continue
            targets = node.targets if t is ast.Assign else [node.target]
            names = [dotted(e) for target in targets for e in (target.elts if target.__class__ in (ast.Tuple, ast.List) else [target])]
            names = [n for n in names if n]
            if value.__class__ in (ast.Name, ast.Attribute):
                copies.append((dotted(value), names))
            elif any(
                n.__class__ is ast.Call and (is_move(n, DTYPES) or (dotted(n.func) or "").endswith("Loss"))
                for n in ast.walk(value)
            ):
                found.update(names)
        elif t is ast.Call and is_move(node, DTYPES):
            receiver = dotted(node.func.value)
            if receiver:
                found.add(receiver)
    for _ in range(2):
        for source, names in copies:
            if source in found:
                found.update(names)
    return found
