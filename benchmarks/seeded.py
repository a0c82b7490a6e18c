#!/usr/bin/env python3
"""DEV111 recall by mutation: remove one device move of a batch item from real training loops.

Run it by hand with the interpreter of the venv that has devlint installed (not in CI):

    .venv/bin/python benchmarks/seeded.py                  # every package, every mutant
    .venv/bin/python benchmarks/seeded.py --only d2l,skorch --missed 40
    .venv/bin/python benchmarks/seeded.py --budget 5       # at most 5 mutants per package
    .venv/bin/python benchmarks/seeded.py --set heldout    # the held-out packages only (validation)
    .venv/bin/python benchmarks/seeded.py --set heldout --all-files   # and DEV111 on files without mutants

Mature libraries hold almost no DEV111 bug (their loops were fixed long ago), so recall on real
code is measured by seeding one: the packages of ``ecosystem.py`` (and a few more with training
loops) are fetched at run time into ``benchmarks/.cache/ecosystem/`` by its ``fetch`` (pinned,
``pip download --no-deps``, never committed). In every loop (``for``/``while``) and every step
function (a parameter named ``batch``, ``inputs``...) outside the packages' tests, each device
move of a batch item (``.to(<not a dtype>)`` or ``.cuda()`` on a name the loop binds, or on an
item of it) becomes a mutant with that one move removed, in one of these shapes:

* ``x = x.to(d)``: the rebinding of the same expression, which becomes ``x = x``;
* ``y = e.to(d)``: an assignment of a moved item to another name (``y = e``);
* ``tuple half``: one element of ``x, y = x.to(d), y.to(d)``;
* ``call arg``: a move written in a call's argument, ``model(x.to(d))`` -> ``model(x)``;
* ``chained``: (held-out shapes) a move that opens a chain, ``x.to(d).float() / 255`` -> ``x.float() / 255``;
* ``.cuda()``: any of these where the move is ``.cuda()``.

``HELDOUT`` is a second group of packages (plain training scripts and trainers) kept for
validation: tune DEV111 on the default set, then check it on ``--set heldout`` (reported on its
own). It is mutated with wider shapes (``wide``): the chained move, annotated assignments and
tuple literals (``inputs = (a.to(d), b.to(d))``), and items a call unpacks from the batch
(``imgs, pids = self.parse_data_for_train(data)``); ``--wide`` applies them to the default set.

A mutant is kept only when the model is known to be on a device (the function or the module
moves a module-like name with ``.to``/``.cuda``, or another item of the same batch is still
moved after the mutation: the author's own code then says where the model lives) and the
unmoved value still reaches a call (not only through a later move of it). No mutant is made of a
move that only aligns two results (``y.to(scores.device)``, ``scores`` computed in the function), nor
where the device is ``torch.device("cpu")`` (the model is on the CPU too). Moves of a whole batch (``{k: v.to(d) for ...}``,
``batch.to(d)`` of the loop's only name) are not "one item" and are left alone.

Each mutant (one edited file, line numbers kept) is linted in process with ``--select DEV111``;
it is *caught* when a DEV111 finding appears that the unmutated file does not have. The output:
recall per package and per shape, and every DEV111 finding on the unmutated files that hold
mutants (they must have none: each would be a false positive or a real bug to judge in the
ecosystem ledger). Standard library (``ast``) plus devlint itself.
"""
from __future__ import annotations

import argparse
import ast
import collections
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import ecosystem  # noqa: E402  (the pinned packages and their fetch/cache)

from seeded_sets import EIGHTH, EXTRA, FIFTH, FOURTH, FRESH, HELDOUT, PACKAGES, SETS, SEVENTH, SIXTH  # noqa: E402,F401  (the package groups)
SHAPES = ("x = x.to(d)", "y = e.to(d)", "tuple half", "call arg", "chained", ".cuda()")

_DTYPE_WORDS = frozenset(
    "float16 half bfloat16 float32 float float64 double int8 uint8 int16 short int32 int int64 long bool "
    "complex64 cfloat complex128 cdouble dtype".split()
)
_MODELISH = re.compile(
    r"(^|_)(model|models|net|network|module|encoder|decoder|backbone|classifier|generator|discriminator|"
    r"transformer|unet|student|teacher|policy|critic|actor|autoencoder|vae|gan)s?$", re.I
)
#: step functions: a parameter of one of these names is a batch (or an item of one)
_BATCH_PARAMS = frozenset({"batch", "inputs", "data", "sample", "samples", "minibatch", "mini_batch"})
#: calls whose argument does not make an unmoved tensor meet a model
_HARMLESS = frozenset(
    "len print isinstance range int float str type id repr hasattr getattr zip enumerate append extend insert "
    "add put cpu numpy item tolist detach size dim numel log info debug warning".split()
)
_STEP_FUNCTION = re.compile(r"batch|step|train|fit|eval|valid|predict|infer|epoch", re.I)
_NOT_DATA = frozenset({"self", "cls", "device", "devices", "optimizer", "optim", "opt", "scheduler", "epoch", "step", "args", "cfg", "config"})
#: items that may stay on the CPU by design (``pack_padded_sequence`` lengths), or are no tensors
_CPU_SIDE = re.compile(r"(^|_|\[[\"'])(lens?|lengths?)\b", re.I)
#: ``x.to(<owner>.device)`` with one of these owners places ``x`` by a setting, not beside a tensor
_SETTINGS = frozenset("self args cfg config conf opt opts hparams params trainer accelerator fabric engine runner".split())
_TEST_PATH = re.compile(r"(^|/)(tests?|testing)(/|_)|(^|/)test_[^/]*\.py$|_test\.py$|conftest\.py$")


@dataclass
class Mutant:
    package: str
    path: str
    line: int
    shape: str
    text: str  # the mutated file
    before: str  # the original line, collapsed
    shift_at: int = 0  # lines after this one moved up by ``shift``
    shift: int = 0


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def is_device_move(call: ast.AST) -> bool:
    """``e.cuda(...)`` or ``e.to(<a device>)``: a positional or ``device=`` argument that is not
    a dtype (``torch.float16``, ``x.dtype``) nor the string ``"cpu"``."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return False
    if call.func.attr == "cuda":
        return True
    if call.func.attr != "to":
        return False
    target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
    if target is None or isinstance(target, ast.Starred):
        return False
    if isinstance(target, ast.Constant):
        return isinstance(target.value, str) and target.value.split(":")[0] in ("cuda", "mps", "xpu", "npu", "hpu")
    name = _dotted(target)
    if name and name.rsplit(".", 1)[-1].lower() in _DTYPE_WORDS:
        return False
    return True


def _aligns(move: ast.Call, holder: ast.AST) -> bool:
    """``y.to(scores.device)``, ``scores`` a value ``holder`` computes: a move beside another
    tensor (a metric's inputs), not onto the model's device; removing it seeds no DEV111 bug
    (``x.to(self.device)``, ``strategy.device`` of a parameter, ``args.device``, ``model.device``
    and ``next(model.parameters()).device`` are placements)."""
    target = move.args[0] if move.args else next((k.value for k in move.keywords if k.arg == "device"), None)
    if not (isinstance(target, ast.Attribute) and target.attr == "device" and isinstance(target.value, ast.Name)):
        return False
    owner = target.value.id
    if owner in _SETTINGS or _MODELISH.search(owner):
        return False
    return any(isinstance(n, (ast.Assign, ast.For, ast.AsyncFor)) and owner in set().union(
        *(_names(t) for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))) for n in _own_walk(holder))


def _on_cpu(move: ast.Call, holder: ast.AST) -> bool:
    """``x.to(device)`` where every binding of ``device`` in ``holder`` is ``torch.device("cpu")``
    or ``"cpu"``: the model is on the CPU too (pyod's ts_lstm), so no mutant of it is a bug."""
    target = move.args[0] if move.args else next((k.value for k in move.keywords if k.arg == "device"), None)
    if not isinstance(target, ast.Name):
        return False
    values = [n.value for n in _own_walk(holder) if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == target.id for t in n.targets)]
    cpu = lambda v: "cpu" in ast.unparse(v) and "cuda" not in ast.unparse(v) and "else" not in ast.unparse(v)  # noqa: E731
    return bool(values) and all(cpu(v) for v in values)


def _unmoved_names(arg: ast.AST):
    """The names in ``arg`` outside the receivers of device moves (``y`` of ``f(y.to(d))`` is moved there)."""
    stack = [arg]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Call) and is_device_move(node):
            stack.extend((*node.args, *(k.value for k in node.keywords)))
        else:
            stack.extend(ast.iter_child_nodes(node))


def _root(node: ast.AST) -> str | None:
    """The name an item expression starts from: ``batch`` of ``batch["x"][0].float()``."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return None


def _names(target: ast.AST) -> set[str]:
    """The names an assignment target binds (``x``, ``x, (y, *z)``; not ``self`` of ``self.x``)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Starred):
        return _names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_names(e) for e in target.elts)) if target.elts else set()
    return set()


def _own_walk(node: ast.AST):
    """Every node under ``node`` outside nested defs, classes and lambdas."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(n))


def _batchy_call(value: ast.AST) -> bool:
    """``next(it)``, ``loader.next_batch()``, ``get_batch(...)``: a call that hands out a batch."""
    if not isinstance(value, ast.Call):
        return False
    name = _dotted(value.func).rsplit(".", 1)[-1]
    return name == "next" or "batch" in name.lower()


def _statements(body: list[ast.stmt]):
    """The statements of ``body`` in source order, nested blocks included, defs excluded."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list):
                for item in inner:
                    if isinstance(item, ast.stmt):
                        yield from _statements([item])
                    elif hasattr(item, "body"):
                        yield from _statements(item.body)


def _unpacks(value: ast.AST, bound: set[str]) -> bool:
    """``parse_data(batch)``, ``self.split(data)``: a call (no model's) handed a bound name."""
    if not isinstance(value, ast.Call):
        return False
    name = _dotted(value.func).rsplit(".", 1)[-1] or "-"
    if _MODELISH.search(name) or name in _HARMLESS or name in ("forward", "__call__"):
        return False
    return any(isinstance(a, ast.Name) and a.id in bound for a in value.args)


def _bound_names(region: ast.AST, seeds: set[str], wide: bool = False) -> set[str]:
    """``seeds`` plus the names the region binds from them (``x, y = batch``, ``x = batch[0]``,
    ``x = batch["x"].to(d)``) or from a call handing out a batch; ``wide``: also from a call
    handed a bound name (``imgs, pids = self.parse_data_for_train(data)``)."""
    bound = set(seeds)
    for stmt in _statements(region.body):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            values = value.elts if isinstance(value, ast.Tuple) else [value]
            if any(_root(v) in bound or _batchy_call(v) or wide and _unpacks(v, bound) for v in values):
                for t in targets:
                    bound |= {n for n in _names(t) if not isinstance(t, ast.Attribute)}
        elif isinstance(stmt, (ast.For, ast.AsyncFor)) and stmt is not region:
            pass
    return bound


def _model_moved(scope: ast.AST) -> bool:
    """Does ``scope`` move a module-like name (``model.to(d)``, ``self.net.cuda()``,
    ``model = Net().to(d)``)?"""
    for node in _own_walk(scope):
        if isinstance(node, ast.Call) and is_device_move(node):
            receiver = node.func.value
            name = _dotted(receiver).rsplit(".", 1)[-1]
            if name and _MODELISH.search(name):
                return True
            if isinstance(receiver, ast.Call) and _dotted(receiver.func)[:1].isupper():
                return True  # Net(...).to(device)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and is_device_move(node.value):
            if any(_MODELISH.search(_dotted(t).rsplit(".", 1)[-1] or "-") for t in node.targets):
                return True
    return False


class _Finder:
    """The mutation sites of one file."""

    def __init__(self, text: str, tree: ast.Module, wide: bool = False) -> None:
        self.text, self.tree, self.wide = text, tree, wide
        self.lines = text.splitlines(keepends=True)
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.module_moves_model = _model_moved(tree)
        self.scatters = "DataParallel(" in text.replace("DistributedDataParallel(", "")
        #: functions and methods of the file that move a parameter themselves
        #: (``def encode_batch(self, wavs, lens): wavs = wavs.to(self.device)``): an item
        #: handed to one of them unmoved is no bug
        self.self_moving = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
                if any(isinstance(n, ast.Call) and is_device_move(n) and _root(n.func.value) in params - {"self"}
                       for n in _own_walk(node)):
                    self.self_moving.add(node.name)

    def regions(self):
        """(region, the def holding it or the module, seed names): loops and step functions."""
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.For, ast.AsyncFor)):
                it = node.iter
                if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values", "keys"):
                    continue  # for k, v in batch.items(): a whole batch's move, item by item
                yield node, self._holder(node), _names(node.target)
            elif isinstance(node, ast.While):
                yield node, self._holder(node), set()
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
                seeds = set(params) & _BATCH_PARAMS
                if _STEP_FUNCTION.search(node.name) and node.name != "forward":
                    # def train_batch(self, X, y): every parameter but the model, device and the like
                    seeds |= {p for p in params if p not in _NOT_DATA and not _MODELISH.search(p)}
                if seeds:
                    yield node, node, seeds

    def _holder(self, node: ast.AST) -> ast.AST:
        p = self.parents.get(node)
        while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
            p = self.parents.get(p)
        return p if p is not None else self.tree

    def _statement(self, node: ast.AST) -> ast.stmt:
        while not isinstance(node, ast.stmt):
            node = self.parents[node]
        return node

    def _top(self, move: ast.Call) -> ast.AST:
        """``move``, or with ``wide`` the whole chain it opens: ``x.to(d).float() / 255``."""
        node = move
        while self.wide:
            parent = self.parents.get(node)
            if isinstance(parent, ast.Attribute) and isinstance(self.parents.get(parent), ast.Call) \
                    and self.parents[parent].func is parent:
                node = self.parents[parent]  # x.to(d).float(), .squeeze(-1), .long()
            elif isinstance(parent, ast.BinOp) and node is parent.left:
                node = parent  # x.to(d).float() / 255
            else:
                return node
        return node

    def _shape(self, move: ast.Call) -> str | None:
        """The mutation shape of removing ``move``, or ``None`` (not one item's move)."""
        top = self._top(move)
        parent = self.parents.get(top)
        if isinstance(parent, ast.AnnAssign) and self.wide and parent.value is top:
            shape = "x = x.to(d)" if ast.unparse(parent.target) == ast.unparse(move.func.value) else "y = e.to(d)"
        elif isinstance(parent, ast.Assign) and parent.value is top and len(parent.targets) == 1:
            target = parent.targets[0]
            if isinstance(target, (ast.Tuple, ast.List)):
                return None  # x, y = batch.to(d): the whole batch
            same = ast.unparse(target) == ast.unparse(move.func.value)
            shape = "x = x.to(d)" if same else "y = e.to(d)"
        elif isinstance(parent, ast.Tuple) and isinstance(self.parents.get(parent), ast.Assign):
            assign = self.parents[parent]
            if assign.value is not parent or not (self.wide or any(isinstance(t, ast.Tuple) for t in assign.targets)):
                return None  # wide: inputs = (a.to(d), b.to(d)) too
            shape = "tuple half"
        elif isinstance(parent, ast.Call) and top in parent.args or isinstance(parent, ast.keyword):
            call = parent if isinstance(parent, ast.Call) else self.parents.get(parent)
            if not isinstance(call, ast.Call):
                return None
            name = _dotted(call.func)
            last = name.rsplit(".", 1)[-1]
            if not name or last in _HARMLESS or last in self.self_moving:
                return None
            if isinstance(parent, ast.keyword) and last.lstrip("_")[:1].isupper():
                return None  # State(cached_lengths=t.to(d)): a field stored in an object, not computed with
            shape = "call arg"
        else:
            return None
        return shape

    def _used_in_call(self, names: set[str], region: ast.AST, after: int) -> bool:
        """Does a name of ``names`` reach a call's argument on a line after ``after``?"""
        for node in _own_walk(region):
            if not isinstance(node, ast.Call) or node.lineno <= after:
                continue
            last = _dotted(node.func).rsplit(".", 1)[-1]
            if last in _HARMLESS or last in self.self_moving:
                continue  # the item is kept, shown, or moved by the callee itself
            for arg in (*node.args, *(k.value for k in node.keywords)):
                if any(n in names for n in _unmoved_names(arg)) and not (
                    isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr in ("size", "dim", "numel", "item", "tolist")
                ):
                    return True
        return False

    def sites(self):
        """(move call, shape, region) of every mutation site, each move once."""
        seen = set()  # and a whole batch's move, for b in loader: b = b.to(d), seen from any region
        for loop in ast.walk(self.tree):
            if isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.target, ast.Name):
                seen |= {id(n) for n in _own_walk(loop) if isinstance(n, ast.Call) and is_device_move(n)
                         and isinstance(n.func.value, ast.Name) and n.func.value.id == loop.target.id}
        for region, holder, seeds in self.regions():
            bound = _bound_names(region, seeds, self.wide)
            if not bound:
                continue
            moves = [n for n in _own_walk(region) if isinstance(n, ast.Call) and is_device_move(n)]
            if any(isinstance(m.func.value, ast.Name) and m.func.value.id in seeds and not isinstance(self.parents[m], ast.Tuple)
                   and len(seeds) == 1 for m in moves):
                continue  # batch = batch.to(d) first: its items are on the device already
            for move in moves:
                if id(move) in seen or _root(move.func.value) not in bound:
                    continue
                if _MODELISH.search(_dotted(move.func.value).rsplit(".", 1)[-1] or "-"):
                    continue  # a module taken from a loop over submodules: no batch item
                if isinstance(move.func.value, ast.Name) and move.func.value.id in seeds and len(seeds) == 1 and not isinstance(region, ast.While):
                    continue  # for batch in loader: batch.to(d) moves the whole batch
                form = self._shape(move)
                if form is None or _aligns(move, holder) or _on_cpu(move, holder) or _CPU_SIDE.search(ast.unparse(move.func.value)):
                    continue  # lengths stay on the CPU by design (pack_padded_sequence)
                if self.scatters and (holder is self.tree or "DataParallel(" in ast.unparse(holder) or (any(
                        _MODELISH.search(a.arg) for a in holder.args.args) and not _model_moved(holder))):
                    continue  # nn.DataParallel scatters CPU inputs: an unmoved input may be no bug
                others = [m for m in moves if m is not move and _root(m.func.value) in bound]
                if not (others or self.module_moves_model or _model_moved(holder)):
                    continue  # nothing says the model is on a device
                stmt, top = self._statement(move), self._top(move)
                if form == "call arg":  # model(x.to(d)) after x = x.to(d): a second move, no bug without it
                    used = not (isinstance(move.func.value, ast.Name) and any(
                        isinstance(n, ast.Assign) and n.lineno < move.lineno and is_device_move(n.value)
                        and move.func.value.id in _names(n.targets[0]) for n in _own_walk(region)))
                else:
                    assign = stmt if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
                    names = set()
                    if assign is not None:
                        t = assign.targets[0] if isinstance(assign, ast.Assign) else assign.target
                        if assign.value is top or not isinstance(t, (ast.Tuple, ast.List)):
                            names = _names(t)
                        else:  # tuple half: the matching target
                            i = assign.value.elts.index(top)
                            if i < len(t.elts):
                                names = _names(t.elts[i])
                    used = bool(names) and self._used_in_call(names, region, stmt.end_lineno) and not any(
                        isinstance(n, ast.Attribute) and n.attr == "device" and isinstance(n.value, ast.Name)
                        and n.value.id in names and n.lineno > stmt.end_lineno for n in _own_walk(region))
                    # out.to(y.device) after it: the rest follows y wherever it is (fairscale's pipe)
                if not used:
                    continue
                seen.add(id(move))
                label = "chained" if top is not move else form
                yield move, ".cuda()" if move.func.attr == "cuda" else label, region

    def mutate(self, move: ast.Call) -> tuple[str, int, int] | None:
        """The file with ``move`` replaced by its receiver (same line numbers where it parses
        so), with (line after which lines shifted, shift), or ``None``."""
        receiver = move.func.value
        lines = self.lines
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))

        def at(lineno: int, col: int) -> int:  # ast columns are UTF-8 byte offsets
            return offsets[lineno - 1] + len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8", "replace"))

        start, end = at(receiver.end_lineno, receiver.end_col_offset), at(move.end_lineno, move.end_col_offset)
        cut = self.text[start:end]
        newlines = cut.count("\n")
        for text, shift in ((self.text[:start] + "\n" * newlines + self.text[end:], 0), (self.text[:start] + self.text[end:], newlines)):
            try:
                ast.parse(text)
            except SyntaxError:
                continue
            return text, move.end_lineno, shift
        return None


def mutants_of(package: str, path: str, text: str, wide: bool = False) -> list[Mutant]:
    """Every kept mutant of one file (see the module docstring); ``wide`` adds the chained
    shape, annotated and tuple-literal assignments and items unpacked by a helper call."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    finder = _Finder(text, tree, wide)
    out = []
    for move, shape, _ in finder.sites():
        made = finder.mutate(move)
        if made is None:
            continue
        mutated, at, shift = made
        line = finder.lines[move.lineno - 1] if move.lineno <= len(finder.lines) else ""
        out.append(Mutant(package, path, move.lineno, shape, mutated, " ".join(line.split()), at, shift))
    return out


def dev111_lines(text: str, path: str) -> set[int]:
    """Lines of the DEV111 findings of devlint on ``text`` (in process)."""
    from devlint.runner import check_text

    return {f.line for f in check_text(text, path, ["DEV111"], []) if f.code == "DEV111"}


def caught(m: Mutant, before: set[int]) -> bool:
    """Does the mutant raise a DEV111 finding the unmutated file did not have?"""
    after = dev111_lines(m.text, m.path)
    mapped = {line if line <= m.shift_at or not m.shift else line + m.shift for line in after}
    return bool(mapped - before)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated package names (default: all)")
    parser.add_argument("--budget", type=int, default=0, help="at most this many mutants per package (0: all)")
    parser.add_argument("--missed", type=int, default=0, help="list at most this many uncaught mutants")
    parser.add_argument("--offline", action="store_true", help="use only packages already in the cache")
    parser.add_argument("--set", choices=sorted(SETS), default="default",
                        help="default: the tuned-on packages; heldout: the validation packages (HELDOUT); "
                        "fresh: the third group (FRESH); fourth: the fourth (FOURTH); fifth: the fifth (FIFTH); sixth: the sixth (SIXTH); seventh: the seventh (SEVENTH); eighth: the eighth (EIGHTH); all: every one")
    parser.add_argument("--wide", action="store_true", help="the held-out's wider shapes on every set (on for heldout)")
    parser.add_argument("--all-files", action="store_true",
                        help="also lint the files without mutants (that move something) for DEV111 findings")
    args = parser.parse_args(argv)
    chosen = SETS[args.set]
    wide = args.wide or args.set in ("heldout", "fresh", "fourth", "fifth", "sixth", "seventh", "eighth")
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        chosen = [p for p in chosen if p.name in wanted]
    per_pkg: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    per_shape: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    unmutated: list[str] = []
    missed: list[Mutant] = []
    unfetched: list[str] = []
    others = 0
    for pkg in chosen:
        dest = ecosystem.CACHE / "src" / f"{pkg.name}-{pkg.version}"
        if args.offline and not (dest / ".done").exists():
            continue
        try:
            root = ecosystem.fetch(pkg)
        except (subprocess.CalledProcessError, SystemExit) as err:  # one package never ends the run
            ecosystem.log(f"skipped {pkg.label}: could not fetch it ({err})")
            unfetched.append(pkg.label)
            continue
        ecosystem.log(f"mutating {pkg.label}")
        taken = 0
        for rel in ecosystem.files_of(pkg, root):
            if _TEST_PATH.search(rel):
                continue
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
            if ".to(" not in text and ".cuda(" not in text:
                continue
            mutants = mutants_of(pkg.name, rel, text, wide or pkg in HELDOUT or pkg in FRESH or pkg in FOURTH or pkg in FIFTH or pkg in SIXTH or pkg in SEVENTH or pkg in EIGHTH)
            if args.budget:
                mutants = mutants[: max(0, args.budget - taken)]
            if not mutants:
                if args.all_files:  # precision over the rest of the package too
                    unmutated += [f"{pkg.name}/{rel}:{line}" for line in sorted(dev111_lines(text, rel))]
                    others += 1
                continue
            per_pkg[pkg.name]["files"] += 1
            before = dev111_lines(text, rel)
            unmutated += [f"{pkg.name}/{rel}:{line}" for line in sorted(before)]
            for m in mutants:
                hit = caught(m, before)
                taken += 1
                for table, key in ((per_pkg, pkg.name), (per_shape, m.shape)):
                    table[key]["mutants"] += 1
                    table[key]["caught"] += hit
                if not hit:
                    missed.append(m)
            if args.budget and taken >= args.budget:
                break
    if args.set != "default" or args.wide:
        print(f"set: {args.set}" + (" (wide shapes)" if wide else " (wide shapes on the held-out packages)"))
    print(report(per_pkg, per_shape, unmutated))
    if args.all_files:
        print(f"(the unmutated files include {others} files without mutants)")
    if unfetched:
        print(f"not measured (could not be fetched here): {', '.join(unfetched)}")
    for m in missed[: args.missed]:
        print(f"  missed [{m.shape}] {m.package}/{m.path}:{m.line}: {m.before}")
    return 0


def report(per_pkg: dict, per_shape: dict, unmutated: list[str]) -> str:
    """The tables: recall per package and per shape, and the unmutated files' findings."""
    def rows(table: dict, order) -> list[str]:
        out = []
        for key in order:
            c = table.get(key)
            if c and c["mutants"]:
                out.append(f"| {key} | {c['mutants']} | {c['caught']} | {c['caught'] / c['mutants']:.2f} |")
        return out

    total = collections.Counter()
    for c in per_pkg.values():
        total.update(c)
    lines = ["| package | mutants | caught | DEV111 recall |", "|---|---:|---:|---:|"]
    lines += rows(per_pkg, sorted(per_pkg))
    recall = f"{total['caught'] / total['mutants']:.2f}" if total["mutants"] else "-"
    lines.append(f"| all | {total['mutants']} | {total['caught']} | {recall} |")
    lines += ["", "| shape | mutants | caught | DEV111 recall |", "|---|---:|---:|---:|"]
    lines += rows(per_shape, SHAPES)
    lines.append(f"\nDEV111 findings on the unmutated files: {len(unmutated)}")
    lines += [f"  ! {u}" for u in unmutated]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
