"""The stdlib ``ast`` helpers and shared predicates the rules' pre-checks read.

Small questions asked of one node or one :class:`devlint.precheck.Unit` of the file's stdlib
``ast`` (a dotted name, a call's arguments, a class's methods, could a call move a value to an
accelerator, could an expression build an ``nn.Module``), shared by the ``candidate``
predicates in the rules' files and by :mod:`devlint.precheck_cpu_flow`. Each over-approximates
what the libcst analyses it stands for would find (named in each docstring).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # annotations only
    from .precheck import Facts, Unit

_Attribute, _Name, _Call, _Constant = ast.Attribute, ast.Name, ast.Call, ast.Constant

def dotted(node: ast.AST | None) -> str | None:
    """``a.b.c`` for an ``ast`` Name/Attribute chain, else ``None``."""
    parts = []
    while node.__class__ is _Attribute:
        parts.append(node.attr)
        node = node.value
    if node.__class__ is not _Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def arguments(call: ast.Call) -> list[ast.AST]:
    """The argument expressions of a call, positional then keyword (``*a``/``**k`` included,
    ``*a`` as ``a``, as libcst's ``Arg.value`` has it)."""
    return [*(a.value if a.__class__ is ast.Starred else a for a in call.args), *(kw.value for kw in call.keywords)]


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def methods_of(cls: ast.ClassDef, name: str) -> list[ast.AST]:
    """The ``def name`` statements of a class body, also under an ``if``/``try``/``with``/loop
    there (the engine's scopes count those as methods too), not inside a nested def or class."""
    found, stack = [], list(cls.body)
    while stack:
        s = stack.pop()
        t = s.__class__
        if t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            if s.name == name:
                found.append(s)
        elif t is not ast.ClassDef:
            for field in _BLOCKS:
                stack.extend(getattr(s, field, ()) or ())
    return found


def walk(node: ast.AST) -> Iterable[ast.AST]:
    """Every node under ``node`` (itself included)."""
    return ast.walk(node)


def has_backward(facts: Facts) -> bool:
    """A ``.backward(...)`` call or one of ``torch.autograd.backward``."""
    return "backward" in facts.methods or bool(facts.calls_to({"torch.autograd.backward"}))


#: Methods of a module that return it (``devlint.modules.MODULE_METHODS`` and the dataflow's).
_MODULE_METHODS = frozenset(
    {"to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16", "requires_grad_", "share_memory"}
)


def strip_module_methods(expr: ast.AST) -> ast.AST:
    """``nn.Linear(2, 2).to(device).eval()`` -> ``nn.Linear(2, 2)`` (stdlib ``ast``)."""
    while expr.__class__ is _Call and expr.func.__class__ is _Attribute and expr.func.attr in _MODULE_METHODS:
        expr = expr.func.value
    return expr


def builds_module(expr: ast.AST, facts: Facts) -> bool:
    """Could ``expr`` build an ``nn.Module`` (:func:`devlint.modules.is_module_constructor`, the
    dataflow's ``MODEL``): a call of a capitalised name (``nn.Linear``, a class) or of a class
    of the file, ``from_pretrained``, ``create_model``, a ``torchvision.models`` function,
    through module methods (``.to(device).eval()``)?"""
    expr = strip_module_methods(expr)
    if expr.__class__ is not _Call:
        return False
    name = dotted(expr.func) or ""
    last = name.rsplit(".", 1)[-1]
    if last[:1].isupper() or last in ("from_pretrained", "create_model") or last in facts.class_names:
        return True
    return any(n.startswith("torchvision.models.") for n in facts.resolve(expr.func))


def module_class(cls: ast.ClassDef, facts: Facts) -> bool:
    """Could this class be an ``nn.Module`` (:func:`devlint.modules.is_module_base`): a base
    named ``*Module``/``*Model``/``*Loss`` or for a class of the file, or from ``torch.nn``, or
    a ``forward`` method (:func:`devlint.modules.is_module_class`; any base here)?"""
    if cls.bases and any(s.__class__ is ast.FunctionDef and s.name == "forward" for s in cls.body):
        return True
    for base in cls.bases:
        last = (dotted(base) or "").rsplit(".", 1)[-1]
        if last.endswith(("Module", "Model", "Loss")) or last in facts.class_names:
            return True
        if any(n.startswith("torch.nn") for n in facts.resolve(base)):
            return True
    return False




def top_functions(facts: Facts) -> set[str]:
    """Names of the module-level ``def`` s (the functions the dataflow summarises)."""
    return {s.name for s in facts.tree.body if s.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef)}


def resolves_to(call: ast.Call, facts: Facts, names: frozenset[str]) -> bool:
    """May the callee of ``call`` resolve to one of ``names`` through the file's imports?"""
    return not facts.resolve(call.func).isdisjoint(names)


def torch_dtype(expr: ast.AST, facts: Facts, dtypes: frozenset[str]) -> bool:
    """Is ``expr`` spelled ``torch.<dtype>`` (``torch.float16``) where every import of the file
    binds that head to ``torch``, one of them a top-level ``import`` (so that the engine's import
    table knows it before any use) and no top-level ``def``/``class`` shadows it?"""
    if expr.__class__ is not _Attribute or expr.value.__class__ is not _Name or expr.attr not in dtypes:
        return False
    heads = facts.memo.get("torch_heads")
    if heads is None:
        bound, shadowed = set(), set()
        for statement in facts.tree.body:
            t = statement.__class__
            if t is ast.Import:
                bound.update(a.asname or a.name.split(".", 1)[0] for a in statement.names)
            elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                shadowed.add(statement.name)
        heads = facts.memo["torch_heads"] = {h for h in bound - shadowed if facts.aliases.get(h) == {"torch"}}
    return expr.value.id in heads


def may_move(call: ast.Call, facts: Facts | None = None, dtypes: frozenset[str] = frozenset()) -> bool:
    """Could ``<x>.cuda(...)``/``<x>.to(...)`` put ``x`` on an accelerator as
    :meth:`devlint.dataflow.DeviceFlow._placed` reads it: ``.cuda()``, or ``.to`` with a
    target that is not the literal ``"cpu"`` nor spelled like a dtype (``x.dtype``,
    ``torch.float16``)?"""
    func = call.func
    if func.__class__ is not _Attribute:
        return False
    if func.attr == "cuda":
        return True
    if func.attr != "to":
        return False
    target = next((a for a in call.args if a.__class__ is not ast.Starred), None)
    if target is None:
        target = next((kw.value for kw in call.keywords if kw.arg == "device"), None)
    if target is None:
        return False
    if target.__class__ is _Constant and target.value == "cpu":
        return False
    if facts is not None and torch_dtype(target, facts, dtypes):
        return False
    name = dotted(target) or ""
    return not name.endswith("dtype")


def calls_in(unit: Unit, root: ast.AST) -> Iterable[tuple[ast.Call, ast.AST]]:
    """``(call, the innermost def holding it, else root)`` for every call of the unit (the
    children of a node in ``ast.iter_child_nodes`` order, read inline: that generator was most
    of the cost on a file of 100k calls)."""
    stack = [(statement, root) for statement in reversed(unit.statements)]
    pop, push, AST = stack.pop, stack.append, ast.AST
    while stack:
        node, context = pop()
        t = node.__class__
        if t is _Call:
            yield node, context
        elif t is _Name or t is _Constant:
            continue  # no call below
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            context = node
        for field in t._fields:
            value = getattr(node, field, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, AST):
                        push((item, context))
            elif isinstance(value, AST):
                push((value, context))


def unit_may_move(unit: Unit, facts: Facts, dtypes: frozenset[str]) -> bool:
    """Could the unit make a value on an accelerator: a :func:`may_move` call or a ``device=``
    keyword (a factory on a device)?"""
    return "device" in unit.keywords or any(may_move(c, facts, dtypes) for c in unit.calls("to", "cuda"))


def own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a ``def``'s own body: nested ``def``/``class``/``lambda`` bodies left out."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        t = node.__class__
        if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(node))
