"""DEV111: a model on a device called with a tensor that never left the CPU."""

from __future__ import annotations

import ast

import libcst as cst

from ..dataflow import DTYPES, MIXB, DeviceFlow
from ..precheck import CpuFlow, arguments, calls_in, may_augment, unit_may_move
from ..precheck_dev_scope import DevScopes, constructed_loss
from ..rule import Rule


def _candidate_call(facts) -> ast.Call | None:
    """The first call :meth:`InputNotOnModelDevice.candidate` finds, or ``None``."""
    dev = [unit_may_move(unit, facts, DTYPES) for unit in facts.units]
    if not any(dev):
        return None
    scopes = DevScopes.of(facts, DTYPES)
    for unit in facts.units:
        root = unit.node if unit.node is not None else facts.tree
        flow = None
        for call, context in calls_in(unit, root):
            if not (call.args or call.keywords):
                continue
            func = call.func
            if func.__class__ is not ast.Attribute and func.__class__ is not ast.Name and not constructed_loss(call):
                continue
            # any other callee may be a helper given a model's output and an item left behind
            # (DeviceFlow.check_call's ``helper``), so the callee narrows nothing more; but
            # every finding needs a device value (or a partly moved batch) in the call's frame,
            # or a callee that is a parameter judged by the call sites (DevScopes)
            if not scopes.may_report(call, context, facts):
                continue
            flow = flow or CpuFlow(facts, root)
            if any(not flow.quiet(a, context) for a in arguments(call)):
                return call
    return None


#: the nodes that hold statements (``try``'s handlers and ``match``'s cases hold them too)
_BLOCK_NODES = (ast.stmt, ast.excepthandler, ast.match_case)


def _candidate_in_place(facts) -> bool:
    """An augmented assignment whose target (``x`` of ``x += e``, ``t`` of ``t[:, 2:] *= e``) may
    be a CPU tensor (not :meth:`devlint.precheck.CpuFlow.quiet`), in a file that may move
    something: :meth:`devlint.dataflow.DeviceFlow.check_in_place` may report it."""
    if not may_augment(facts) or not any(unit_may_move(unit, facts, DTYPES) for unit in facts.units):
        return False
    for unit in facts.units:
        root = unit.node if unit.node is not None else facts.tree
        flow = None
        stack = [(statement, root) for statement in unit.statements]
        while stack:
            node, context = stack.pop()
            if node.__class__ is ast.AugAssign:
                target = node.target.value if node.target.__class__ is ast.Subscript else node.target
                if target.__class__ is ast.Name:
                    flow = flow or CpuFlow(facts, root)
                    if not flow.quiet(target, context):
                        return True
            elif node.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef):
                context = node
            stack.extend((child, context) for child in ast.iter_child_nodes(node) if isinstance(child, _BLOCK_NODES))
    return False


#: comparison operators that compare tensors element by element (not ``is``, ``in``)
_ELEMENTWISE_OPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_OPERANDS = (ast.Name, ast.Attribute, ast.Subscript)


def _candidate_comparison(facts) -> bool:
    """An element-wise comparison (``out.argmax(1) == y``) with an operand that may be a CPU
    tensor (a name, an attribute or a subscript, not :meth:`devlint.precheck.CpuFlow.quiet`), in
    a unit that may move something: :meth:`devlint.dataflow.DeviceFlow.check_comparison` may
    report it."""
    for unit in facts.units:
        if not unit_may_move(unit, facts, DTYPES):
            continue
        root = unit.node if unit.node is not None else facts.tree
        flow = None
        stack = [(statement, root) for statement in unit.statements]
        while stack:
            node, context = stack.pop()
            if node.__class__ is ast.Compare and any(op.__class__ in _ELEMENTWISE_OPS for op in node.ops):
                for operand in (node.left, *node.comparators):
                    if operand.__class__ in _OPERANDS:
                        flow = flow or CpuFlow(facts, root)
                        if not flow.quiet(operand, context):
                            return True
            elif node.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef):
                context = node
            stack.extend((child, context) for child in ast.iter_child_nodes(node))
    return False


class InputNotOnModelDevice(Rule):
    """A model moved to a device is called with a tensor that is still on the CPU."""

    code = "DEV111"
    name = "input-not-on-model-device"
    message = "input never moved to the model's device: use .to(device)"
    triggers = (".to(", ".cuda(", "LightningModule")
    requires = (DeviceFlow,)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: something that may put a value on an accelerator (:func:`unit_may_move`),
        and a call with an argument that may be a CPU tensor, a batch of them or an item of a
        batch (not :meth:`devlint.precheck.CpuFlow.quiet`) whose callee may be a model or a
        loss as ``DeviceFlow.check_call`` reads it: a name (a local, a parameter, an import), a
        method named like a model or a loss (or ``generate``/``forward``/``encode``), or
        ``self.<x>`` where the class or the module may move something (a moved model kept on
        ``self``); or an augmented assignment whose target may be such a tensor
        (``x += noise``); or an element-wise comparison with such an operand (``out == y``);
        or a ``LightningModule`` (:mod:`devlint.lightning_steps`)."""
        return (_candidate_call(facts) is not None or _candidate_in_place(facts) or _candidate_comparison(facts)
                or "LightningModule" in facts.text)

    what_it_does = """
Follows, in each function and in the module body, which names hold a model moved with
`.to(device)`/`.cuda()` and which hold tensors known to be on the CPU: a `DataLoader` batch
(`for x, y in loader`, `batch["x"]`, `next(iter(loader))`), a tokenizer's output with
`return_tensors="pt"`, `torch.from_numpy(...)`, `torch.tensor([...])`, a factory call without
`device=`, or a function of the same module whose every `return` is such a tensor (or a dict or
tuple of them). It flags the call of the moved model (or of a loss on the model's output) that
receives one of them, including through `**batch` and `*batch`.

The loops people write take their model and loader as parameters
(`def train(model, loader, optimizer, device)`), so it also reads the author's own evidence:
when some items of a batch from iterating a parameter (or `self.loader`) are moved to a device
and another item of that batch reaches the model (`model(...)`, `model.generate/forward/encode`)
or its loss (`criterion(out, y)`, `F.cross_entropy`) unmoved, the unmoved one is flagged. A
same-module call site counts too: when every call `train(model, loader, ...)` passes a moved
model and a `DataLoader`, an unmoved batch reaching the model inside `train` is flagged.
The same evidence is read in more of the shapes real loops take: an item moved inside the call
(`model(x.to(d))`, `loss_fn(model(x.to(d)), y)`), a batch from `loader.next_batch()`, from a
sampler's method (`self.sampler.sample(X)`) or from `metric_logger.log_every(loader, ...)`, a
step function's `batch` parameter (`batch["x"].to(d)` then `batch["y"]` unmoved), the
parameters of a function that moves one of them (`def train_step(self, x, y): x = x.to(d)`,
then `y` reaches the loss; also in a step loop over `range(steps)` that indexes them), names bound by a
`match` pattern, the fields of a step's parameter (`data.x` beside `data.edge_index.to(d)`), a
batch drawn with `next(...)` from a `DataLoader`, a loss built where it is called
(`nn.MSELoss()(out, y)`), a `DataLoader` returned by a helper of the same module, an item moved in
the body of a `try` but not in a handler that goes on after it (or the other way round), and a
name bound in one arm of an `if` and nowhere else in the function (`if cfg.task == "cls":
labels = batch["labels"]`: whoever reads it took that arm), one bound to an item in one arm and
only to `None` in the other (`else: labels = None`), and one moved in one arm and bound unmoved
in the other while a sibling moved before the `if`. `torch.transpose(batch, 1, 2)` (and the
other view functions) of a one-tensor batch is that batch, and an item handed by keyword to a
computing helper of this file (`_flatten_preds(out, label=label)`) is data. A loss given an
item left behind while its sibling moved is flagged even when the model's output comes from a
helper; so is a helper or a tensor method (`get_log_probs(logits, labels)`, `metric.update(pred,
y)`) given a model's output and such an item, unless it is a function or method of this file
(which may move what it receives). `x.to(y.device)` says where `y` is, not that `y` stayed behind.
`torch.compile(model)`, `DistributedDataParallel(model)` and `FSDP(model)` keep the placement of
what they wrap; `enumerate`, `tqdm` and `zip` keep the loader; `torch.stack`/`torch.cat` of CPU
tensors is on the CPU; a `DataLoader` over one tensor yields that tensor (`x.float()` of it stays
on the CPU).
Where a batch is partly moved (some items moved, anywhere on the straight path of the loop or
step body, also under `if use_cuda:` or `if x is not None:`), an item left behind is also
flagged where it meets the moved ones without a model call: in a dict, list or `torch.cat`
handed to a computing helper, as the first argument after a model handed to a helper
(`forward(model, x, task_labels)`: later ones, such as task labels, may stay on the CPU), in a
call of a module held by `self` (`self.hparams.normalizer(mel, lens)`) or of a method of the class that
moves nothing itself, at a helper call (`pred = self.get_logits(x)`) whose output reaches
a loss or a model, and at a step function of this file given a moved item and one left behind
(`training_step(image, target)`, a closure or a module function that moves nothing itself); a
layer the class builds for itself (`self.embed_user = nn.Embedding(...)`), called in one of its
methods that is no `forward`, needs no moved item beside it. An item left behind compared with
the model's output (`(torch.argmax(out, -1) == targets).sum()`, `out.argmax(1).eq(y)`) is
flagged there: CUDA raises for a device tensor compared with a CPU one of more than 0 dims (not
a parameter of the function, which may be a number, nor an element `y[0]`, which is 0-dim). Items a helper parses out of one
unmoved batch (`imgs, pids = self.parse_data(data)`, a helper that moves nothing) and the parts of a step parameter (`x, y = batch_x`) are items of it.

Tensors moved with `.to(device)` (also `{k: v.to(device) for k, v in batch.items()}` and
`batch.to(device)`), created with `device=`, produced by the model, or returned by a helper the
linter cannot see into are left alone, as is a batch from a loader the linter cannot see when
no item of it is moved (a prefetcher may place it), a `DataLoader` whose `collate_fn` (a function
of the same module) or whose Dataset's `__getitem__` returns device tensors, items that stay on
the CPU by design
(`lengths` for `pack_padded_sequence`, file names, raw text, a sample's index; a graph's
`edge_index` is no such index), parameters that are no items of
a batch (a loop counter such as `iteration`, a `cfg`, a classmethod's `cls`, whose call builds an
instance), an argument a helper of this file only holds (fills `out.set(...)`, hands on as
`generation_config=cfg`), calls that hand their arguments to another callable (`Thread(target=f,
args=...)`), a tensor this function builds with `device=` (no model's output), a value moved only
onto another model's device (`x.to(self.ref_model.device)` beside `self.model(x)`), a model still wrapped in
`nn.DataParallel` where it is called (which scatters CPU inputs; also through an alias, a
parameter a call of this file passes it to, a helper of this file that calls it, a subclass;
not a model unwrapped again with `.module`, nor the file's other models), Lightning `LightningModule` methods and code that uses `accelerate`
(`accelerator.prepare`), which place the data themselves. What Lightning does not place is a
tensor a step builds: in a `LightningModule`'s `*_step` method or per-batch/per-epoch hook
(`on_validation_epoch_end`), a factory without `device=`, `torch.tensor([...])` or
`torch.from_numpy(...)` fed to `self(...)`/`self.forward(...)` (when the class's `forward` moves
nothing itself) or to a `torch.nn` layer with weights held on `self` (`self.lstm(x, (h0, c0))`)
is flagged; its batch items never are. In a file that calls
`torch.set_default_device(device)` (or sets a CUDA default tensor type), factories without
`device=` land on that device and are not taken for CPU tensors. A tensor put on the CPU on purpose
with `.cpu()` is DEV103's finding."""
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
        '''import torch.nn.functional as F


def train_epoch(model, loader, optimizer, device):
    model.train()
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        logits = model(images)
        loss = F.cross_entropy(logits, labels)  # expect: DEV111
        loss.backward()
''',
        '''from torch.utils.data import DataLoader, TensorDataset


def evaluate(model, loader):
    for x, y in loader:
        model(x)  # expect: DEV111


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
net = torch.compile(nn.Linear(4, 2).to(device))
evaluate(net, DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 2)), batch_size=4))
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
        '''def train(model, loader, criterion, device):
    for tokens, lengths, target in loader:
        tokens, target = tokens.to(device), target.to(device)
        out = model(tokens, lengths)  # pack_padded_sequence wants CPU lengths
        criterion(out, target).backward()
''',
    )
    fix_safety = "This rule has no autofix: where to move the data (and whether non_blocking applies) is the author's choice."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        #: calls that are the bug if the module's call sites say so: (node, statement, needs)
        self._pending: list[tuple[cst.Call, int, frozenset, str]] = []
        self._reported: set[int] = set()
        #: comprehensions and lambdas being walked (their comparisons are not judged)
        self._nested = 0

    def _message(self, arg: cst.Arg | None) -> str:
        """The message, naming the CPU-side argument when its code is short (``target``,
        ``batch["labels"]``, ``**batch``)."""
        code = cst.Module([]).code_for_node(arg.value) if arg is not None else ""
        mixed = arg is not None and not arg.star and self._mixed(arg)
        if not code or len(code) > 40 or "\n" in code:
            return "tensors moved and left on the CPU mixed here: move them all" if mixed else self.message
        if arg.star:
            return self.fitted(f"{arg.star}{code} never moved to the model's device: move its tensors with .to(device)",
                               f"{arg.star}{code} never moved to the model's device: move its tensors", self.message)
        if mixed:  # {"x": x.to(d), "y": y}, torch.cat([a, b.to(d)])
            return self.fitted(f"{code} mixes moved tensors with one left on the CPU: move them all",
                               "tensors moved and left on the CPU mixed here: move them all")
        if isinstance(arg.value, (cst.Name, cst.Attribute, cst.Subscript)):
            return self.fitted(f"{code} never moved to the model's device: use {code}.to(device)",
                               f"{code} never moved to the model's device: use .to(device)", self.message)
        return self.fitted(f"{code} never moved to the model's device: move it with .to(device)",
                           f"{code} never moved to the model's device: use .to(device)", self.message)

    def _mixed(self, arg: cst.Arg) -> bool:
        """Is the argument a container of moved tensors and one left on the CPU (``MIXB``)?"""
        held = self.ctx.analysis(DeviceFlow).value(arg.value)
        return held is not None and held.kind == MIXB

    def visit_Call(self, node: cst.Call) -> None:
        flow = self.ctx.analysis(DeviceFlow)
        now, needs = flow.check_call(node)
        if now:
            self._reported.add(id(node))
            self.report(node, self._message(flow.culprit))
        elif needs:
            self._pending.append((node, self.ctx.statement_index, needs, self._message(flow.culprit)))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if self._nested:
            return  # a comprehension's or a lambda's own names: the flow reads the frame's
        operand = self.ctx.analysis(DeviceFlow).check_comparison(node)
        if operand is not None:
            self.report(node, self._message(cst.Arg(value=operand)))

    def _enter(self, node: cst.CSTNode) -> None:
        self._nested += 1

    def _leave(self, node: cst.CSTNode) -> None:
        self._nested -= 1

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda = _enter
    leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = leave_Lambda = _leave

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        target = self.ctx.analysis(DeviceFlow).check_in_place(node)
        if target is not None:
            self.report(node, self._message(cst.Arg(value=target)))

    def leave_Module(self, node: cst.Module) -> None:
        flow = self.ctx.analysis(DeviceFlow)
        saved = self.ctx.statement_index
        for call, statement, needs, message in self._pending:
            if flow.requirements_met(needs):
                self.ctx.statement_index = statement  # the engine places a report by its statement
                self._reported.add(id(call))
                self.report(call, message)
        for call, statement, arg in flow.fed_hits.values():
            if id(call) not in self._reported:  # its output, from an input left behind, reached a loss or a model
                self.ctx.statement_index = statement
                self.report(call, self._message(arg))
        self.ctx.statement_index = saved
