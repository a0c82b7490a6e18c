"""Where the device dataflow may see a CPU tensor, read from the stdlib ``ast`` (a pre-check).

:class:`CpuFlow` reads one class of the file's stdlib ``ast`` (see its docstring), so that the
rules whose findings need a CPU tensor inside a module's methods
(``input_not_on_model_device``, ``tensor_attribute_not_buffer``) can tell, before libcst
parses the file, that no such value can arise there.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .batches import BATCH_PARAMS
from .precheck_predicates import dotted, nodes_under, own_nodes, top_functions

if TYPE_CHECKING:  # annotations only
    from .precheck_predicates import Facts

_Attribute, _Name, _Call, _Constant = ast.Attribute, ast.Name, ast.Call, ast.Constant
#: match patterns that bind a name (``case x``, ``case [*rest]``, ``case {**rest}``)
_CAPTURES = (ast.MatchAs, ast.MatchStar, ast.MatchMapping)


# ---- where the device dataflow may see a CPU tensor (DEV113's pre-check) ----------------------

#: Displays the dataflow reads as a batch (``CPUB``) at most, never as one CPU tensor.
_DISPLAYS = (ast.Tuple, ast.List, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
#: Expressions the dataflow gives no kind at all (``_value`` has no branch for them; a string
#: literal is at most a CPU *device*; ``None``/``True``/``False`` are names never bound).
_KINDLESS = (ast.Constant, ast.JoinedStr, ast.Lambda, ast.BoolOp, ast.Set, ast.Await, ast.Yield, ast.YieldFrom,
             ast.NamedExpr)
#: ``torch.*`` prefixes whose calls the dataflow gives no tensor kind (``_library_call``).
_NO_TENSOR_PREFIXES = ("torch.optim", "torch.utils", "torch.cuda", "torch.distributed", "torch.backends")
_STEP_BUDGET = 20_000
_WRAPPERS = frozenset({"compile", "DistributedDataParallel", "FullyShardedDataParallel"})
_JOINS = frozenset({"stack", "cat", "concat", "concatenate", "vstack", "hstack", "dstack"})
#: ``torch.<short>`` calls ``DeviceFlow._library_call`` may read as a CPU tensor by themselves
_CPU_MAKING = frozenset(
    "zeros ones empty full arange range randn rand randint randperm eye linspace logspace normal bernoulli "
    "multinomial tril_indices triu_indices poisson tensor as_tensor from_numpy onnx.operators.shape_as_tensor "
    "Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor LongTensor IntTensor ShortTensor CharTensor "
    "ByteTensor BoolTensor".split()
)


def _is_none(expr: ast.AST) -> bool:
    """The literal ``None``."""
    return expr.__class__ is ast.Constant and expr.value is None


def _placement(statement: ast.Expr):
    """For a statement ``<x>.to/cuda/cpu(...)`` whose ``x`` is a name or an attribute (which
    ``DeviceFlow.visit_Expr`` rebinds to the placed value), the class of ``x``; else ``None``."""
    call = statement.value
    if call.__class__ is _Call and call.func.__class__ is _Attribute and call.func.attr in ("to", "cuda", "cpu"):
        receiver = call.func.value.__class__
        if receiver is _Name or receiver is _Attribute:
            return receiver
    return None


class CpuFlow:
    """Over-approximates, on the stdlib ``ast`` of one class, where
    :class:`devlint.dataflow.DeviceFlow` may give a value the kind ``CPU`` (a CPU tensor) or
    ``CPUB`` (a batch of them) inside the class's methods.

    It follows ``DeviceFlow._value`` case by case but flow-insensitively: a local name may hold
    what any binding of it in the method holds (every binding that is not a plain assignment
    counts as unknown), ``self.<x>`` what any assignment of ``<name>.x`` in the class holds;
    outer frames lend no tensors (``DeviceFlow.lookup``). :meth:`quiet` is True only where the
    kind is surely neither; a cycle or anything unhandled counts as "may be"."""

    def __init__(self, facts: Facts, cls: ast.ClassDef) -> None:
        self.facts, self.cls = facts, cls
        self.helpers = facts.memo.get("top_functions")
        if self.helpers is None:
            self.helpers = facts.memo["top_functions"] = top_functions(facts)
        self._bindings: dict[int, dict[str, list]] = {}
        self._attrs: dict[str, list] | None = None
        self._memo: dict[tuple, bool] = {}
        self._busy: set[tuple] = set()
        self._assumed = self._steps = 0

    # -- bindings -------------------------------------------------------------------------------
    def _method_bindings(self, method: ast.AST) -> dict[str, list]:
        """name -> [(value, method) or None (a binding other than a plain assignment)]."""
        found = self._bindings.get(id(method))
        if found is not None:
            return found
        found = {}
        plain: set[int] = set()
        for node in nodes_under(method, self.facts):
            t = node.__class__
            if t is ast.Assign:
                for target in node.targets:
                    if target.__class__ is _Name:
                        found.setdefault(target.id, []).append((node.value, method))
                        plain.add(id(target))
            elif t is ast.AnnAssign or t is ast.AugAssign:
                if node.target.__class__ is _Name:
                    plain.add(id(node.target))
                    if node.value is not None:
                        found.setdefault(node.target.id, []).append((node.value, method))
            elif t is ast.Expr and _placement(node) is _Name:
                found.setdefault(node.value.func.value.id, []).append(None)  # `x.to(t)` rebinds x
            elif t is _Name and node.ctx.__class__ is not ast.Load and id(node) not in plain:
                found.setdefault(node.id, []).append(None)
            elif t in _CAPTURES and getattr(node, "name" if t is not ast.MatchMapping else "rest", None):
                found.setdefault(node.name if t is not ast.MatchMapping else node.rest, []).append(None)  # case {"x": x}
            elif t is ast.arg and node.arg in BATCH_PARAMS:
                found.setdefault(node.arg, []).append(None)  # def step(model, batch, device): a batch
        if method.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef) and _moves_a_parameter(method, self.facts):
            for arg in _parameters(method):  # def step(self, x, y): x moved, so y is an item too
                found.setdefault(arg, []).append(None)
        self._bindings[id(method)] = found
        return found

    def _attr_bindings(self) -> dict[str, list]:
        """attribute -> [(value, method) or None] over every method of the class."""
        if self._attrs is not None:
            return self._attrs
        found: dict[str, list] = {}
        methods = [s for s in nodes_under(self.cls, self.facts) if s.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef)]
        for method in methods:
            plain: set[int] = set()
            for node in nodes_under(method, self.facts):
                t = node.__class__
                if t is ast.Assign or t is ast.AnnAssign:
                    targets = node.targets if t is ast.Assign else [node.target]
                    for target in targets:
                        if target.__class__ is _Attribute:
                            plain.add(id(target))
                            if node.value is not None:
                                found.setdefault(target.attr, []).append((node.value, method))
                elif t is ast.AugAssign and node.target.__class__ is _Attribute:
                    plain.add(id(node.target))  # the dataflow binds augmented names only
                elif t is ast.Expr and _placement(node) is _Attribute:
                    found.setdefault(node.value.func.value.attr, []).append(None)  # `self.m.to(t)` rebinds it
                elif t is _Attribute and node.ctx.__class__ is not ast.Load and id(node) not in plain:
                    found.setdefault(node.attr, []).append(None)
        self._attrs = found
        return found

    def _no_summary(self, name: str) -> bool:
        """Is every module-level ``def name`` surely summarised as no CPU tensor or batch
        (``DeviceFlow.leave_FunctionDef``: a summary needs every ``return`` of the function's
        own body to give one, and one ``return`` at least)?"""
        key = ("summary", name)
        if key in self._memo:
            return self._memo[key]
        if key in self._busy:
            return False
        self._busy.add(key)
        try:
            ok = True
            for statement in self.facts.tree.body:
                if statement.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef) and statement.name == name:
                    returns = [r for r in own_nodes(statement) if r.__class__ is ast.Return]
                    ok = ok and (not returns or any(r.value is None or self.quiet(r.value, statement) for r in returns))
        finally:
            self._busy.discard(key)
        self._memo[key] = ok
        return ok

    def _all_quiet(self, key: tuple, bindings: list) -> bool:
        """Are all ``bindings`` of a name (or attribute) quiet? A name met again while its own
        bindings are being read is assumed quiet (``x = x.float()`` adds nothing: the dataflow
        only ever propagates kinds from a source, so the least fixpoint is the sound one); a
        result that rests on such an assumption is kept only where it cannot be wrong (a "may
        be", or the outermost name). Past a step budget, everything may be."""
        if key in self._memo:
            return self._memo[key]
        if key in self._busy:
            self._assumed += 1
            return True
        self._steps += 1
        if self._steps > _STEP_BUDGET:
            return False
        before = self._assumed
        self._busy.add(key)
        try:
            ok = all(b is not None and self.quiet(*b) for b in bindings)
        finally:
            self._busy.discard(key)
        if not ok or self._assumed == before or not self._busy:
            self._memo[key] = ok
        return ok

    @staticmethod
    def self_name(method: ast.AST) -> str | None:
        """The first positional parameter of a ``def`` (``self`` in a method), else ``None``."""
        if method.__class__ is not ast.FunctionDef and method.__class__ is not ast.AsyncFunctionDef:
            return None
        args = method.args
        positional = [*args.posonlyargs, *args.args]
        return positional[0].arg if positional else None

    # -- kinds ----------------------------------------------------------------------------------
    def not_cpu(self, expr: ast.AST, method: ast.AST) -> bool:
        """Surely not the kind ``CPU`` (a display may be a ``CPUB``)."""
        return expr.__class__ in _DISPLAYS or self.quiet(expr, method)

    def quiet(self, expr: ast.AST, method: ast.AST) -> bool:
        """Surely neither ``CPU`` nor ``CPUB`` in ``method`` (a method of the class)."""
        t = expr.__class__
        if t in _KINDLESS:
            return True
        if t is _Name:
            bindings = self._method_bindings(method).get(expr.id)
            return not bindings or self._all_quiet(("name", id(method), expr.id), bindings)
        if t is _Attribute:
            if not self.quiet(expr.value, method):
                return False
            if expr.value.__class__ is _Name and expr.value.id == self.self_name(method):
                bindings = self._attr_bindings().get(expr.attr)
                return not bindings or self._all_quiet(("attr", expr.attr), bindings)
            return True
        if t is ast.Subscript:
            return self.quiet(expr.value, method)
        if t is ast.BinOp or t is ast.Compare:
            operands = [expr.left, expr.right] if t is ast.BinOp else [expr.left, *expr.comparators]
            return self._quiet_combination(operands, method)
        if t is ast.UnaryOp:
            return self.not_cpu(expr.operand, method)
        if t is ast.IfExp:  # x if c else None: the kind of x (ExpressionKinds._value)
            if _is_none(expr.orelse) or _is_none(expr.body):
                return self.quiet(expr.orelse if _is_none(expr.body) else expr.body, method)
            return self.quiet(expr.body, method) or self.quiet(expr.orelse, method)
        if t is _Call:
            return self._quiet_call(expr, method)
        return False

    def _quiet_call(self, call: ast.Call, method: ast.AST) -> bool:
        if any(kw.arg == "return_tensors" for kw in call.keywords):
            return False
        func = call.func
        last = (dotted(func) or "").rsplit(".", 1)[-1]
        positional = [a for a in call.args if a.__class__ is not ast.Starred]
        if last == "enumerate" and positional:
            return True
        if last == "zip" and positional and len(positional) == len(call.args):
            return True
        for name in self.facts.resolve(func):
            if not self._quiet_library(name, call, method):
                return False
        if func.__class__ is _Name:
            return func.id != "next" and (func.id not in self.helpers or self._no_summary(func.id))
        if func.__class__ is _Attribute:
            attr = func.attr
            if attr == "from_pretrained" or attr == "cuda":
                return True
            if attr in ("cpu", "to"):
                return False
            if attr == "type_as":
                return not call.args or self.not_cpu(call.args[0], method)
            return self.quiet(func.value, method)
        return True

    def _quiet_library(self, name: str, call: ast.Call, method: ast.AST) -> bool:
        """Does ``DeviceFlow._library_call(name, call)`` surely give neither CPU nor CPUB (or
        defer to the unresolved reading, which :meth:`_quiet_call` checks too)? Its cases, in
        its order."""
        last = name.rsplit(".", 1)[-1]
        if last == "DataLoader":
            return True
        if last == "TensorDataset":
            return False
        if not name.startswith("torch."):
            return True
        if name == "torch.device":
            return True
        if last in _WRAPPERS and (last != "compile" or name == "torch.compile"):
            return True
        short = name[6:]
        if last[:1].islower() and any(part[:1].isupper() for part in short.split(".")[:-1]):
            return True
        if short in _CPU_MAKING:
            return False  # factories, torch.tensor, legacy constructors, shape_as_tensor, torch.normal(...)
        positional = [a for a in call.args if a.__class__ is not ast.Starred]
        if short in _JOINS and call.args and not self._not_cpub(call.args[0], method):
            return False  # torch.stack(<a batch of CPU tensors>)
        if last.endswith("_like"):
            return False
        if name.startswith("torch.nn.") and last[:1].isupper() and (name.count(".") == 2 or name.startswith("torch.nn.modules.")):
            return True
        if name.startswith(_NO_TENSOR_PREFIXES):
            return True
        if last[:1].islower():  # the arguments combined (DeviceFlow._combine)
            operands = []
            for a in positional:
                if a.__class__ is ast.List or a.__class__ is ast.Tuple:
                    operands.extend(e.value if e.__class__ is ast.Starred else e for e in a.elts)
                else:
                    operands.append(a)
            return self._quiet_combination(operands, method)
        return True

    def _quiet_combination(self, operands: list, method: ast.AST) -> bool:
        """``DeviceFlow._combine``: a CPU tensor only if every operand it counts is one (numbers
        are never counted, ``<name>.<x>`` may be: a number held on ``self`` is not). Quiet when
        an operand surely counted is surely not a CPU tensor, or when no operand that may be
        counted may be one."""
        counted = [o for o in operands if not (o.__class__ is _Constant and not isinstance(o.value, (str, bytes)))]
        surely = [o for o in counted if not (o.__class__ is _Attribute and o.value.__class__ is _Name)]
        return any(self.not_cpu(o, method) for o in surely) or all(self.not_cpu(o, method) for o in counted)

    def _not_cpub(self, expr: ast.AST, method: ast.AST) -> bool:
        """Surely not the kind ``CPUB``: quiet, or a display with an item that is surely not a CPU
        tensor (``DeviceFlow._container`` and ``_comprehension`` need every item to be one)."""
        t = expr.__class__
        if t is ast.List or t is ast.Tuple:
            return any(e.__class__ is not ast.Starred and self.not_cpu(e, method) for e in expr.elts)
        if t is ast.Dict:
            return any(k is not None and self.not_cpu(v, method) for k, v in zip(expr.keys, expr.values))
        if t in (ast.ListComp, ast.SetComp, ast.GeneratorExp):
            return self.not_cpu(expr.elt, method)
        if t is ast.DictComp:
            return self.not_cpu(expr.value, method)
        return self.quiet(expr, method)


def _parameters(function: ast.AST) -> list[str]:
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


def _moves_a_parameter(function: ast.AST, facts: Facts) -> bool:
    """Does the ``def`` move one of its own parameters with ``.to(...)``/``.cuda(...)``
    (``DeviceFlow`` then takes its parameters for the items of one batch)?"""
    params = set(_parameters(function))
    for node in nodes_under(function, facts):
        if node.__class__ is _Call and node.func.__class__ is _Attribute and node.func.attr in ("to", "cuda"):
            receiver = node.func.value
            while receiver.__class__ in (_Attribute, ast.Subscript, _Call):
                receiver = receiver.func.value if receiver.__class__ is _Call and receiver.func.__class__ is _Attribute else getattr(receiver, "value", None)
            if receiver.__class__ is _Name and receiver.id in params:
                return True
    return False
