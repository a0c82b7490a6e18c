"""Imports, scopes and availability guards, tracked during the walk.

:class:`GuardTracker` is the first participant of every traversal: it fills the file's
:class:`devlint.context.Context` with the import table, the scope being visited and the nodes
that only run where an accelerator exists (the predicates are :mod:`devlint.guards`')."""

from __future__ import annotations

import re
from typing import Sequence

import libcst as cst

from . import guards
from .context import Scope
from .names import dotted
from .rule import Participant


#: Packages that only import where CUDA exists: an import of one guards the block holding it.
CUDA_ONLY_PACKAGES = frozenset(
    {"megatron", "apex", "transformer_engine", "flash_attn", "xformers", "cupy", "pycuda", "tensorrt", "pynvml"}
)


def imports_cuda_only(statement: cst.CSTNode) -> bool:
    """Is ``statement`` a line that imports a CUDA-only package (``import xformers.ops``,
    ``from apex import amp``)? Relative imports are the file's own package, not CUDA-only."""
    if statement.__class__ is not cst.SimpleStatementLine:
        return False
    for small in statement.body:
        t = small.__class__
        if t is cst.Import:
            heads = [(dotted(a.name) or "").split(".", 1)[0] for a in small.names]
        elif t is cst.ImportFrom and not small.relative:
            heads = [(dotted(small.module) or "").split(".", 1)[0]]
        else:
            continue
        if any(h in CUDA_ONLY_PACKAGES for h in heads):
            return True
    return False


class GuardTracker(Participant):
    """The engine's own bookkeeping: imports, scopes and availability guards."""

    def visit_Import(self, node: cst.Import) -> None:
        self.ctx.names.add(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.ctx.names.add(node)

    def visit_Module(self, node: cst.Module) -> None:
        for statement in node.body:  # imports first: a function above an import still resolves
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        self.ctx.names.add(small)
        self.ctx.scope = Scope("module", node, None, "<module>")
        self.ctx.exit_functions = {  # def _skip_or_fail(msg): ... pytest.skip(msg)
            s.name.value for s in node.body if s.__class__ is cst.FunctionDef and guards.exits(s, self.ctx)
        }
        self.ctx.none_without_accelerator = {
            s.name.value for s in node.body if s.__class__ is cst.FunctionDef and guards.none_without_accelerator(s, self.ctx)
        }
        positive, negative = guards.assigned_guards(self.ctx.text, self.ctx)
        self.ctx.guard_names |= positive
        self.ctx.negative_guard_names |= negative
        if any(imports_cuda_only(statement) for statement in node.body):
            self.ctx.guard_depth += 1  # a top-level `import apex`: the whole module needs CUDA anyway
        self._early_exits(node.body)

    def _enter(self, kind: str, node) -> None:
        if self.ctx.scope is not None and self.ctx.scope.kind == "module":
            self.ctx.names.forget(node.name.value)  # a module-level def shadows an import
        in_class = self.ctx.scope is not None and self.ctx.scope.kind == "class"
        if (
            guards.decorator_guards(node.decorators, self.ctx)
            or (kind == "class" and guards.accelerator_backend(node))
            or (kind == "function" and in_class and guards.device_method(node.name.value))
        ):
            self.ctx.guard(node.body)  # @skipif(no CUDA), class CUDAAccelerator(Accelerator), def cuda(self)
        self.ctx.scope = Scope(kind, node, self.ctx.scope, node.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter("function", node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._enter("class", node)

    def leave_FunctionDef(self, node) -> None:
        self.ctx.scope = self.ctx.scope.parent

    leave_ClassDef = leave_FunctionDef

    def visit_If(self, node: cst.If) -> None:
        pol = guards.polarity(node.test, self.ctx)
        if pol == 1:
            self.ctx.guard(node.body)
            if isinstance(node.orelse, cst.Else):
                self._cleared_flags(node.orelse.body)
        elif pol == -1:
            self.ctx.guard(node.orelse)
            self._cleared_flags(node.body)

    def _cleared_flags(self, block: cst.BaseSuite) -> None:
        """``if not torch.cuda.is_available(): use_amp = False`` (or the ``else`` of a positive
        test): a flag cleared where CUDA is missing, and never set to the literal True in its
        scope, is true only where CUDA is (``GradScaler("cuda") if use_amp else None`` guards)."""
        if not isinstance(block, cst.IndentedBlock):
            return
        cleared = [name for statement in block.body if isinstance(statement, cst.SimpleStatementLine)
                   for small in statement.body
                   if small.__class__ is cst.Assign and small.value.__class__ is cst.Name and small.value.value == "False"
                   for name in (dotted(t.target) for t in small.targets) if name]
        if not cleared:
            return
        scope = self.ctx.scope  # the scope's text only where a flag is cleared (rare)
        text = cst.Module([]).code_for_node(scope.node) if scope is not None else self.ctx.text
        self.ctx.guard_names.update(
            name for name in cleared if not re.search(rf"(?<![\w.]){re.escape(name)}\s*=\s*True\b", text))

    def visit_For(self, node: cst.For) -> None:
        # for i in range(torch.cuda.device_count()): the body runs only with a device
        if self._counts_devices(node.iter):
            self.ctx.guard(node.body)

    def _counts_devices(self, it: cst.BaseExpression) -> bool:
        """``range(torch.cuda.device_count())``, ``range(n_gpus)`` with ``n_gpus`` assigned from
        it: no iteration without a device."""
        if isinstance(it, cst.Call) and dotted(it.func) == "range" and it.args:
            last = it.args[-1].value if len(it.args) == 1 else it.args[1].value
            return isinstance(last, (cst.Call, cst.Name, cst.Attribute)) and guards.polarity(last, self.ctx) == 1
        return False

    def _comprehension(self, node) -> None:
        """``[torch.device(f"cuda:{i}") for i in range(torch.cuda.device_count())]``: as a loop."""
        if node.for_in.inner_for_in is None and self._counts_devices(node.for_in.iter):
            for part in (getattr(node, "elt", None), getattr(node, "key", None), getattr(node, "value", None)):
                self.ctx.guard(part)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit_Try(self, node: cst.Try) -> None:
        if guards.broad_handler(node):
            self.ctx.guard(node.body)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        pol = guards.polarity(node.test, self.ctx)
        self.ctx.guard(node.body if pol == 1 else node.orelse if pol == -1 else None)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if isinstance(node.operator, cst.And) and guards.polarity(node.left, self.ctx) == 1:
            self.ctx.guard(node.right)

    def _import_flags(self, statement: cst.CSTNode) -> None:
        """``try: import transformer_engine; te_installed = True``: the flag tests the import."""
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) and small.value.value == "True":
                    self.ctx.guard_names.update(n for n in (dotted(t.target) for t in small.targets) if n)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if any(imports_cuda_only(statement) for statement in node.body):
            for statement in node.body:  # a lazy `import xformers` guards its own block only
                self.ctx.guard(statement)
                self._import_flags(statement)
        self._early_exits(node.body)

    def _early_exits(self, body: Sequence[cst.BaseStatement]) -> None:
        """``if not torch.cuda.is_available(): return`` / ``assert torch.cuda.is_available()``
        / ``pytestmark = pytest.mark.skipif(not ...)`` guard the statements after them."""
        for i, statement in enumerate(body):
            opens = False
            kind = statement.__class__
            if kind is cst.If and statement.orelse is None:
                opens = guards.polarity(statement.test, self.ctx) == -1 and guards.exits(statement, self.ctx)
            elif kind is cst.SimpleStatementLine:
                for small in statement.body:
                    small_kind = small.__class__
                    if small_kind is cst.Assert:
                        opens = opens or guards.polarity(small.test, self.ctx) == 1
                    elif small_kind is cst.Assign and small.value.__class__ is cst.Call and (
                            dotted(small.value.func) in self.ctx.none_without_accelerator):
                        # dev = _cuda_device(d) before `if dev is None: return` (see visit_Assign)
                        self.ctx.guard_names.update(n for n in (dotted(t.target) for t in small.targets) if n)
                    elif small_kind is cst.Assign and any(
                        t.target.__class__ is cst.Name and t.target.value == "pytestmark" for t in small.targets
                    ):
                        opens = opens or guards.decorator_guards([cst.Decorator(small.value)], self.ctx)
            if opens:
                for rest in body[i + 1:]:
                    self.ctx.guard(rest)
                return

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if self.ctx.guarded and isinstance(value, cst.Call) and (self.ctx.resolve(value.func) or "").startswith("torch.cuda."):
            # stream = torch.cuda.Stream() under a guard: later `if stream is not None:` is one too
            self.ctx.guard_names.update(n for n in (dotted(t.target) for t in node.targets) if n)
            return
        if value.__class__ is cst.Call and dotted(value.func) in self.ctx.none_without_accelerator:
            # dev = _cuda_device(device): not None only where CUDA is in use
            self.ctx.guard_names.update(n for n in (dotted(t.target) for t in node.targets) if n)
            return
        if self.ctx.guarded and value.__class__ is cst.Name and value.value == "True":
            self._guarded_flag(node)
            return
        pol = guards.polarity(node.value, self.ctx)
        if not pol and isinstance(value, cst.IfExp) and dotted(value.orelse) == "None":
            # index = dev.index if dev.type == "cuda" else None: not None only with a device
            pol = max(guards.polarity(value.test, self.ctx), 0)
        if pol:
            names = self.ctx.guard_names if pol == 1 else self.ctx.negative_guard_names
            for target in node.targets:
                name = dotted(target.target)
                if name:
                    names.add(name)

    def _guarded_flag(self, node: cst.Assign) -> None:
        """``if value.is_cuda: has_cuda = True``: a flag set True once in its scope, under a guard,
        and otherwise only False, is true only where CUDA is in use (``if has_cuda:`` guards)."""
        scope = self.ctx.scope
        text = cst.Module([]).code_for_node(scope.node) if scope is not None else ""
        for target in node.targets:
            name = dotted(target.target)
            if name and len(re.findall(rf"(?<![\w.]){re.escape(name)}\s*=\s*True\b", text)) == 1:
                self.ctx.guard_names.add(name)

    def visit_Param(self, node: cst.Param) -> None:
        # def main(use_cuda=torch.cuda.is_available()): the parameter is assigned from the test
        if node.default is not None and guards.polarity(node.default, self.ctx) == 1:
            self.ctx.guard_names.add(node.name.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if func.__class__ is cst.Attribute and func.attr.value == "add_argument":
            self.ctx.guard_attrs.update(guards.option_guards(node, self.ctx))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and guards.polarity(node.value, self.ctx) == 1:
            name = dotted(node.target)
            if name:
                self.ctx.guard_names.add(name)
