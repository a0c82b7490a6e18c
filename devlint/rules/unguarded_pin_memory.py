"""DEV106: pinned memory requested outside an availability guard.

What raises was checked on torch 2.13's CPU build (RULES.md DEV106, revised turn 3):
``tensor.pin_memory()`` and a factory's ``pin_memory=True`` raise; ``DataLoader(...,
pin_memory=True)`` warns once and runs, so it is left alone.
"""

from __future__ import annotations

import libcst as cst

from ..names import dotted
from ..rule import Rule


class UnguardedPinMemory(Rule):
    """`.pin_memory()` or a factory's `pin_memory=True` outside a test that CUDA is available."""

    code = "DEV106"
    name = "unguarded-pin-memory"
    message = ".pin_memory() raises without CUDA: pin only if cuda.is_available()"
    argument_message = "pin_memory=True raises without CUDA: guard it with is_available()"
    triggers = ("pin_memory",)

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a call ``<expr>.pin_memory(...)`` or a ``pin_memory=`` keyword argument
        (a torch factory's)."""
        return "pin_memory" in facts.methods or "pin_memory" in facts.keywords
    what_it_does = """
Flags `.pin_memory()` calls and a literal `pin_memory=True` argument of a torch factory
(`torch.empty(..., pin_memory=True)`) outside an availability guard. Left alone:
`DataLoader(..., pin_memory=True)` (without an accelerator it warns once and runs unpinned),
`pin_memory=torch.cuda.is_available()` or any other expression, calls inside a guard
(`if torch.cuda.is_available():`, `x.pin_memory() if torch.cuda.is_available() else x`), and
`.pin_memory()` inside a method named `pin_memory` (the custom-batch protocol, which the
DataLoader calls only when it pins)."""
    why_bad = """
Pinned (page-locked) host memory exists to speed up copies to an accelerator. Without one,
`tensor.pin_memory()` raises `RuntimeError: Cannot access accelerator device when none is
available`, and `torch.empty(..., pin_memory=True)` raises that no pinned memory allocator is
available."""
    flagged = (
        '''staged = torch.randn(4, 8).pin_memory()  # expect: DEV106
buffer = torch.empty(1024, pin_memory=True)  # expect: DEV106
''',
    )
    clean = (
        '''from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=16, pin_memory=True)  # warns, runs
batch = torch.randn(4, 8)
staged = batch.pin_memory() if torch.cuda.is_available() else batch


class Batch:
    def __init__(self, x):
        self.x = x

    def pin_memory(self):
        self.x = self.x.pin_memory()
        return self
''',
    )
    fix_safety = "This rule has no autofix."

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._pinners = 0  # depth of `def pin_memory(self)` bodies

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == "pin_memory":
            self._pinners += 1

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == "pin_memory":
            self._pinners -= 1

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "pin_memory":
            if not self._pinners and dotted(func.value) != "torch.Tensor":
                self.report(node)
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "pin_memory" and dotted(arg.value) == "True":
                name = self.ctx.resolve(func) or ""
                if name.startswith("torch.") and name.count(".") == 1:  # torch.empty, torch.zeros...
                    self.report(arg, self.argument_message)
                return
