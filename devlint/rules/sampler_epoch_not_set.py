"""DEV117: a ``DistributedSampler``'s loader iterated epoch after epoch without ``set_epoch``."""

from __future__ import annotations

import libcst as cst

from ..names import dotted
from ..rule import Rule

_SAMPLERS = frozenset({"torch.utils.data.distributed.DistributedSampler", "torch.utils.data.DistributedSampler"})
_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
#: Wrappers that iterate what they are given: ``for i, b in enumerate(tqdm(loader))``.
_PASS = frozenset({"enumerate", "tqdm", "tqdm.tqdm", "iter", "zip", "tqdm.auto.tqdm", "trange"})


class _Loop:
    __slots__ = ("node", "set_epoch", "iterates", "passes")

    def __init__(self, node) -> None:
        self.node, self.set_epoch = node, False
        self.iterates: set[str] = set()
        self.passes: set[tuple[str, str]] = set()  # (loader, called function)


class _Scope:
    __slots__ = ("samplers", "loaders", "loops")

    def __init__(self) -> None:
        self.samplers: set[str] = set()
        #: loader name -> (DataLoader call, top-level statement index, ids of the loops open at its construction)
        self.loaders: dict[str, tuple[cst.Call, int, frozenset[int]]] = {}
        self.loops: list[_Loop] = []


class SamplerEpochNotSet(Rule):
    """A `DistributedSampler` whose `set_epoch` is never called in the epoch loop."""

    code = "DEV117"
    name = "sampler-epoch-not-set"
    message = "shuffling DistributedSampler without set_epoch(): call it every epoch"
    triggers = ("DistributedSampler",)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a ``sampler=`` keyword, a call that may be ``DataLoader`` and one that may
        be ``DistributedSampler`` (through the file's imports): the rule reports a
        ``DataLoader(..., sampler=...)`` call whose sampler was built by one."""
        return "sampler" in facts.keywords and bool(facts.calls_to(_LOADERS)) and bool(facts.calls_to(_SAMPLERS))
    what_it_does = """
Flags the `DataLoader(..., sampler=sampler)` construction whose sampler is a
`torch.utils.data.DistributedSampler` (shuffling, the default) when, in the same function (or
module), the loader is iterated (`for batch in loader`, also through `enumerate`/`tqdm`/`zip`)
inside an outer loop (the epoch loop) that was opened after the loader was built and whose body
never calls `.set_epoch(...)` (on any receiver: `sampler.set_epoch(epoch)`,
`loader.sampler.set_epoch(epoch)`). A loader handed, inside the epoch loop, to a function
defined in the same file counts too when the file calls `set_epoch` nowhere. Left alone:
`shuffle=False`, a loader rebuilt in every epoch, rebound (`accelerator.prepare(loader)`), or
built elsewhere."""
    why_bad = """
`DistributedSampler` shuffles with a generator seeded by `seed + epoch`, and `epoch` only
changes through `set_epoch`. Without it every epoch visits the data in the same order (the
same per-rank shards, the same batches), which loses most of the benefit of shuffling and can
hurt convergence; nothing warns about it."""
    flagged = (
        '''from torch.utils.data import DataLoader, DistributedSampler


def run(model, dataset, opt, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)  # expect: DEV117
    for epoch in range(epochs):
        for x, y in loader:
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
''',
    )
    clean = (
        '''from torch.utils.data import DataLoader, DistributedSampler


def run(model, dataset, opt, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
''',
    )
    fix_safety = "This rule has no autofix."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._scopes: list[_Scope] = [_Scope()]
        self._defined: set[str] = set()
        self._file_sets_epoch = ".set_epoch(" in ctx.text
        self._pending: list[tuple[str, str, tuple]] = []  # (loader, function, (call, top)) decided at the end
        self._reported: set[int] = set()

    # -- scopes ------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._defined.add(node.name.value)
        self._scopes.append(_Scope())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.pop()

    @property
    def _scope(self) -> _Scope:
        return self._scopes[-1]

    # -- bindings ----------------------------------------------------------------------------
    def _is_sampler(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.IfExp):
            return self._is_sampler(value.body) or self._is_sampler(value.orelse)
        if not isinstance(value, cst.Call) or self.ctx.resolve(value.func) not in _SAMPLERS:
            return False
        for arg in value.args:
            if arg.star:
                return False
            if arg.keyword is not None and arg.keyword.value == "shuffle" and dotted(arg.value) != "True":
                return False
        return len([a for a in value.args if a.keyword is None]) < 4  # (dataset, num_replicas, rank, shuffle)

    def visit_Assign(self, node: cst.Assign) -> None:
        scope = self._scope
        names = []
        for target in node.targets:
            names += _names(target.target)
        for name in names:
            scope.samplers.discard(name)
            scope.loaders.pop(name, None)
        if len(node.targets) != 1 or len(names) != 1 or not isinstance(node.targets[0].target, (cst.Name, cst.Attribute)):
            return
        name, value = names[0], node.value
        if self._is_sampler(value):
            scope.samplers.add(name)
        elif isinstance(value, cst.Call) and self.ctx.resolve(value.func) in _LOADERS:
            for arg in value.args:
                if arg.keyword is not None and arg.keyword.value == "sampler":
                    if dotted(arg.value) in scope.samplers or self._is_sampler(arg.value):
                        opened = frozenset(id(loop.node) for loop in scope.loops)
                        scope.loaders[name] = (value, self.ctx.statement_index, opened)

    # -- loops -------------------------------------------------------------------------------
    def visit_For(self, node: cst.For) -> None:
        scope = self._scope
        for name in _iterated(node.iter):
            if name in scope.loaders:
                _, _, opened = scope.loaders[name]
                for loop in scope.loops:
                    if id(loop.node) not in opened:
                        loop.iterates.add(name)
        for name in _names(node.target):
            scope.loaders.pop(name, None)
        scope.loops.append(_Loop(node))

    def visit_While(self, node: cst.While) -> None:
        self._scope.loops.append(_Loop(node))

    def leave_For(self, node) -> None:
        scope = self._scope
        loop = scope.loops.pop()
        if loop.set_epoch:
            return
        for name in loop.iterates:
            if name in scope.loaders:
                self._flag(*scope.loaders[name][:2])
        for name, function in loop.passes:
            if name in scope.loaders:
                self._pending.append((name, function, scope.loaders[name][:2]))

    leave_While = leave_For

    def visit_Call(self, node: cst.Call) -> None:
        scope = self._scope
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "set_epoch":
            for loop in scope.loops:
                loop.set_epoch = True
            return
        if not scope.loops or not isinstance(func, cst.Name):
            return
        for arg in node.args:
            name = dotted(arg.value)
            if name in scope.loaders:
                _, _, opened = scope.loaders[name]
                for loop in scope.loops:
                    if id(loop.node) not in opened:
                        loop.passes.add((name, func.value))

    def leave_Module(self, node: cst.Module) -> None:
        if self._file_sets_epoch:
            return
        for _, function, site in self._pending:
            if function in self._defined:
                self._flag(*site)

    def _flag(self, call: cst.Call, top: int) -> None:
        if id(call) in self._reported:
            return
        self._reported.add(id(call))
        saved = self.ctx.statement_index
        self.ctx.statement_index = top
        try:
            self.report(call)
        finally:
            self.ctx.statement_index = saved


def _names(target: cst.BaseExpression) -> list[str]:
    """The dotted names a binding target assigns (tuple and list targets unpacked)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        out = []
        for element in target.elements:
            out += _names(element.value)
        return out
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    name = dotted(target)
    return [name] if name else []


def _iterated(expr: cst.BaseExpression) -> list[str]:
    """Names a ``for`` iterates: ``loader``, ``enumerate(loader)``, ``tqdm(loader, ...)``, ``zip(a, b)``."""
    name = dotted(expr)
    if name is not None:
        return [name]
    if isinstance(expr, cst.Call) and dotted(expr.func) in _PASS:
        out = []
        for arg in expr.args:
            if arg.keyword is None and not arg.star:
                out += _iterated(arg.value)
            if dotted(expr.func) != "zip":
                break
        return out
    return []
