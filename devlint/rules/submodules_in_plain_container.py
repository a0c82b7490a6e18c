"""DEV114: submodules kept in a Python list, dict or tuple on ``self``."""

from __future__ import annotations

import ast

import libcst as cst

from ..dataflow import MODEL, DeviceFlow
from ..precheck import builds_module, methods_of, module_class, nodes_under
from ..rule import Rule

_EMPTY_CALLS = frozenset({"list", "dict", "tuple"})
_WRAPPERS = frozenset({"list", "tuple", "dict"})
#: Containers that register the modules of the container they are given.
_REGISTERING = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential"})


class SubmodulesInPlainContainer(Rule):
    """Submodules kept in a plain Python container are invisible to `.to()` and the optimizer."""

    code = "DEV114"
    name = "submodules-in-plain-container"
    message = "submodules in a plain list/dict are not registered: use nn.ModuleList"
    triggers = ("__init__",)
    requires = (DeviceFlow,)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: the ``__init__`` of a class that may be a module sets ``self.<x>`` to a
        container that may hold module constructions, or to an empty one that it then fills
        with one through that same attribute (``self.<x>.append/insert/extend(...)``,
        ``self.<x>[k] = ...``), as the rule reads it."""
        for cls in facts.classes:
            if not module_class(cls, facts):
                continue
            for init in methods_of(cls, "__init__"):
                empty = set()
                for node in nodes_under(init, facts):
                    if node.__class__ is not ast.Assign:
                        continue
                    for target in node.targets:
                        if target.__class__ is not ast.Attribute:
                            continue
                        holds = _may_hold_modules(node.value, facts)
                        if holds:
                            return True
                        if holds is None:
                            empty.add(target.attr)
                if empty and any(_fills_with_module(n, facts, empty) for n in nodes_under(init, facts)):
                    return True
        return False

    what_it_does = """
In `__init__` of an `nn.Module` subclass, flags `self.name = [...]` (also a tuple, a dict, a
comprehension, `list(...)`/`tuple(...)` of a generator, or an empty list later filled with
`self.name.append(...)`) whose items are modules: `torch.nn` layers or `nn.Module` subclasses
of the same file. `nn.ModuleList`/`nn.ModuleDict`/`nn.Sequential`, containers of non-modules,
containers of existing module objects (a common way to hide a module from the `state_dict`)
and a container wrapped in `nn.ModuleList`/`nn.ModuleDict`/`nn.Sequential` before `__init__`
ends (`blocks = [...]` then `nn.Sequential(*blocks)`, or `self.paths = [...]` then
`self.path_list = nn.ModuleList(self.paths)`) are left alone."""
    why_bad = """
`nn.Module` registers submodules only when they are assigned directly or through
`nn.ModuleList`/`nn.ModuleDict`. Layers in a plain list are not moved by `model.to(device)`
(the forward pass then raises a device mismatch on a GPU), are not returned by
`model.parameters()` (the optimizer never trains them) and are missing from the
`state_dict`."""
    flagged = (
        '''class Stack(nn.Module):
    def __init__(self, depth=3):
        super().__init__()
        self.layers = [nn.Linear(8, 8) for _ in range(depth)]  # expect: DEV114

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
''',
        '''class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = {}  # expect: DEV114
        for name in ("a", "b"):
            self.heads[name] = nn.Linear(8, 2)
''',
    )
    clean = (
        '''class Stack(nn.Module):
    def __init__(self, depth=3, teacher=None):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(depth))
        self.sizes = [8 for _ in range(depth)]
        self._teacher = [teacher]  # kept out of the state_dict on purpose
        blocks = [nn.Linear(8, 8), nn.ReLU()]
        self.body = nn.Sequential(*blocks)
''',
    )
    fix_safety = "This rule has no autofix: renaming the container changes the `state_dict` keys."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._scopes: list[tuple[object, dict, dict, list] | None] = []

    def _is_module(self, flow: DeviceFlow, expr) -> bool:
        if expr.__class__ is not cst.Call:
            return False
        v = flow.value(expr, {})
        if v is None or v.kind != MODEL or not v.module:
            return False
        # a loss without weight tensors holds no parameters or buffers: nothing to move
        return not v.loss or any(a.keyword is None or a.keyword.value in ("weight", "pos_weight") for a in expr.args)

    def _holds_modules(self, flow: DeviceFlow, expr) -> bool | None:
        """True: a container of modules; None: an empty container; False: anything else."""
        kind = expr.__class__
        if kind is cst.List or kind is cst.Tuple or kind is cst.Set:
            items = [e.value for e in expr.elements if e.__class__ is not cst.StarredElement]
            if not expr.elements:
                return None
            return bool(items) and all(self._is_module(flow, e) for e in items)
        if kind is cst.Dict:
            items = [e.value for e in expr.elements if e.__class__ is cst.DictElement]
            if not expr.elements:
                return None
            return bool(items) and all(self._is_module(flow, e) for e in items)
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            return self._is_module(flow, expr.elt) and expr.__class__ is not cst.GeneratorExp
        if expr.__class__ is cst.DictComp:
            return self._is_module(flow, expr.value)
        if expr.__class__ is cst.Call and expr.func.__class__ is cst.Name and expr.func.value in _WRAPPERS and not self.ctx.resolve(expr.func):
            if not expr.args:
                return None
            inner = expr.args[0].value
            if inner.__class__ is cst.GeneratorExp:
                return self._is_module(flow, inner.elt)
            return self._holds_modules(flow, inner) is True
        return False

    def _scope(self):
        flow = self.ctx.analysis(DeviceFlow)
        frame = flow.frame
        if not self._scopes or self._scopes[-1] is None or self._scopes[-1][0] is not frame:
            return None, flow
        return self._scopes[-1], flow

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.ctx.analysis(DeviceFlow).frame
        ok = frame.name == "__init__" and frame.cls is not None and frame.cls.is_module and frame.self_name
        self._scopes.append((frame, {}, {}, []) if ok else None)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        scope = self._scopes.pop()
        if scope is not None and not scope[3]:  # add_module/register_module registers the items
            for where in scope[1].values():
                self.report(where)

    def _self_attr(self, flow, expr) -> str | None:
        if expr.__class__ is cst.Attribute and flow.is_self(expr.value):
            return expr.attr.value
        return None

    def visit_Assign(self, node: cst.Assign) -> None:
        scope, flow = self._scope()
        if scope is None:
            return
        _, found, empty, _ = scope
        for target in node.targets:
            t = target.target
            name = self._self_attr(flow, t)
            if name is not None:
                holds = self._holds_modules(flow, node.value)
                found.pop(name, None)
                empty.pop(name, None)
                if holds:
                    found[name] = node
                elif holds is None:
                    empty[name] = node
            elif t.__class__ is cst.Subscript:
                name = self._self_attr(flow, t.value)
                if name in empty and self._is_module(flow, node.value):
                    found[name] = empty.pop(name)

    def visit_Call(self, node: cst.Call) -> None:
        scope, flow = self._scope()
        if scope is None:
            return
        _, found, empty, registers = scope
        if self.ctx.resolve(node.func) in _REGISTERING:  # nn.ModuleList(self.paths) registers its items
            for arg in node.args:
                name = self._self_attr(flow, arg.value)
                found.pop(name, None)
                empty.pop(name, None)
            return
        if node.func.__class__ is not cst.Attribute:
            return
        if node.func.attr.value in ("add_module", "register_module") and flow.is_self(node.func.value):
            registers.append(node)
            return
        name = self._self_attr(flow, node.func.value)
        if name in empty and node.func.attr.value in ("append", "insert", "extend") and node.args:
            value = node.args[-1].value
            if self._is_module(flow, value) or (node.func.attr.value == "extend" and self._holds_modules(flow, value)):
                found[name] = empty.pop(name)



def _may_hold_modules(value: ast.AST, facts) -> bool | None:
    """Pre-check on the stdlib ``ast``: could this container hold modules? ``None`` for an empty
    one (``[]``, ``{}``, ``list()``), which later code may fill."""
    t = value.__class__
    if t in (ast.List, ast.Tuple, ast.Set):
        return None if not value.elts else any(builds_module(e, facts) for e in value.elts)
    if t is ast.Dict:
        return None if not value.keys else any(builds_module(e, facts) for e in value.values)
    if t in (ast.ListComp, ast.SetComp, ast.GeneratorExp):
        return builds_module(value.elt, facts)
    if t is ast.DictComp:
        return builds_module(value.value, facts)
    if t is ast.Call and value.func.__class__ is ast.Name and value.func.id in _WRAPPERS | _EMPTY_CALLS:
        if not (value.args or value.keywords):
            return None
        return any(_may_hold_modules(a, facts) is not False or builds_module(a, facts) for a in value.args)
    return False


def _fills_with_module(node: ast.AST, facts, names: set[str]) -> bool:
    """``<x>.<name>.append(<module>)``, ``.insert(i, <module>)``, ``.extend([<module>...])`` or
    ``<x>.<name>[k] = <module>`` for one of ``names`` (stdlib ``ast``; the rule asks that ``<x>``
    be the method's ``self``)."""
    if node.__class__ is ast.Call and node.func.__class__ is ast.Attribute and node.func.attr in ("append", "insert", "extend"):
        receiver = node.func.value
        return (receiver.__class__ is ast.Attribute and receiver.attr in names
                and any(builds_module(a, facts) or _may_hold_modules(a, facts) for a in node.args))
    if node.__class__ is ast.Assign:
        return any(t.__class__ is ast.Subscript and t.value.__class__ is ast.Attribute and t.value.attr in names
                   for t in node.targets) and builds_module(node.value, facts)
    return False
