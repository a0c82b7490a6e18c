"""DEV206: the deprecated ``torch.cuda.amp``/``torch.cpu.amp`` API."""

from __future__ import annotations

import re

import libcst as cst

from ..names import dotted
from ..rule import NodeFix, Rule

#: deprecated name -> its ``torch.amp`` replacement
REPLACEMENTS = {
    "torch.cuda.amp.autocast": 'torch.amp.autocast("cuda", ...)',
    "torch.cuda.amp.autocast_mode.autocast": 'torch.amp.autocast("cuda", ...)',
    "torch.cuda.amp.GradScaler": 'torch.amp.GradScaler("cuda", ...)',
    "torch.cuda.amp.grad_scaler.GradScaler": 'torch.amp.GradScaler("cuda", ...)',
    "torch.cuda.amp.custom_fwd": 'torch.amp.custom_fwd(device_type="cuda", ...)',
    "torch.cuda.amp.custom_bwd": 'torch.amp.custom_bwd(device_type="cuda")',
    "torch.cpu.amp.autocast": 'torch.amp.autocast("cpu", ...)',
    "torch.cpu.amp.autocast_mode.autocast": 'torch.amp.autocast("cpu", ...)',
    "torch.cpu.amp.GradScaler": 'torch.amp.GradScaler("cpu", ...)',
    "torch.cpu.amp.grad_scaler.GradScaler": 'torch.amp.GradScaler("cpu", ...)',
}


#: An ``if`` test that checks the torch version: the deprecated spelling there is a fallback.
_VERSION_GATE = re.compile(r"version|TORCH_(GREATER|LESS|VERSION)|TORCH_\d|torch_\d", re.I)
_FALLBACK_ERRORS = ("ImportError", "ModuleNotFoundError", "AttributeError")


class DeprecatedAmpApi(Rule):
    """The deprecated `torch.cuda.amp` / `torch.cpu.amp` autocast, GradScaler and custom_fwd/bwd."""

    code = "DEV206"
    name = "deprecated-amp-api"
    message = "{name} is deprecated: use {replacement}"
    triggers = ("cuda.amp", "cpu.amp", "import amp")
    what_it_does = """
Flags each import and each use of `torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`,
`torch.cuda.amp.custom_fwd`/`custom_bwd`, `torch.cpu.amp.autocast` and
`torch.cpu.amp.GradScaler`, in any spelling (`torch.cuda.amp.X`, `from torch.cuda.amp import
X`, `from torch.cuda import amp` then `amp.X`, as a call, a decorator or an annotation). The
message names the `torch.amp` replacement. `torch.amp.*` and `torch.autocast` are left alone,
as is code that supports old PyTorch versions on purpose: the deprecated spelling on either
arm of a version test (`torch.amp.GradScaler("cuda") if _TORCH_GREATER_EQUAL_2_4 else
torch.cuda.amp.GradScaler()`, `if is_torch_version(">=", "2.3"): ... else: ...`), in an
`except ImportError`/`except AttributeError` fallback, and a bare reference that probes for
the name (`_ = torch.cpu.amp.autocast` in a `try`)."""
    why_bad = """
These names are deprecated since PyTorch 2.4 and warn on every use (`FutureWarning:
torch.cuda.amp.GradScaler(args...) is deprecated`). They also hard-code the device: the
`torch.amp` spellings take the device type as an argument, so the same code serves CUDA,
CPU, MPS and XPU."""
    flagged = (
        '''from torch.cuda.amp import GradScaler  # expect: DEV206

scaler = GradScaler()  # expect: DEV206
with torch.cuda.amp.autocast():  # expect: DEV206
    y = nn.Linear(2, 2)(torch.ones(1, 2))
''',
    )
    clean = (
        '''dev = "cuda" if torch.cuda.is_available() else "cpu"
scaler = torch.amp.GradScaler(dev)
with torch.autocast(dev, dtype=torch.bfloat16):
    y = nn.Linear(2, 2).to(dev)(torch.ones(1, 2, device=dev))
''',
    )
    fix_safety = """
The fix is safe: the deprecated classes are thin wrappers that pass the device type to the
`torch.amp` ones, so `torch.cuda.amp.GradScaler(init_scale=1024)` and
`torch.amp.GradScaler("cuda", init_scale=1024)` behave identically. It is offered for the
attribute spelling called with keyword arguments only (`torch.cuda.amp.autocast(dtype=...)`
becomes `torch.amp.autocast("cuda", dtype=...)`) and for a bare `@torch.cuda.amp.custom_fwd`;
positional arguments of the old API mean something else in the new signatures, and a
`from torch.cuda.amp import ...` needs its uses rewritten too, so those are left to you. The
fixed call names the device the old one implied, `"cuda"`, which DEV101 then reports: pass your
device variable's type instead (`torch.amp.GradScaler(device.type)`)."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._skip: set[int] = set()
        self._imports = 0
        self._gates: list[cst.BaseExpression] = []  # tests of the enclosing if/else
        self._handlers: list[cst.BaseExpression] = []  # types of the enclosing except clauses
        self._printer = cst.Module(body=[])
        self._calls: dict[int, cst.Call] = {}  # id(call.func) -> call

    def _flag(self, node: cst.CSTNode, name: str | None) -> None:
        replacement = REPLACEMENTS.get(name or "")
        if replacement is None:
            return
        if any(self._version_test(t) for t in self._gates) or any(self._fallback(t) for t in self._handlers):
            return
        self.report(node, self.message.format(name=name, replacement=replacement), self._fix(node, name))

    def visit_Call(self, node: cst.Call) -> None:
        self._calls[id(node.func)] = node

    def _fix(self, node: cst.CSTNode, name: str) -> NodeFix | None:
        """``T.cuda.amp.GradScaler(init_scale=2.0**16)`` -> ``T.amp.GradScaler("cuda", init_scale=2.0**16)``.

        Only the attribute spelling called with keyword arguments (positional arguments mean
        something else in the new signatures), and bare ``custom_fwd``/``custom_bwd``."""
        if not isinstance(node, cst.Attribute) or not isinstance(node.value, cst.Attribute):
            return None
        amp = node.value  # <alias>.cuda.amp
        if amp.attr.value != "amp" or not isinstance(amp.value, cst.Attribute) or not isinstance(amp.value.value, cst.Name):
            return None
        device, alias = amp.value.attr.value, amp.value.value
        if self.ctx.resolve(alias) != "torch" or device not in ("cuda", "cpu"):
            return None
        new_func = cst.Attribute(value=cst.Attribute(value=alias, attr=cst.Name("amp")), attr=node.attr)
        call = self._calls.get(id(node))
        verb = node.attr.value
        if call is None:
            if verb not in ("custom_fwd", "custom_bwd"):
                return None
            text = self._printer.code_for_node(new_func) + f'(device_type="{device}")'
            return NodeFix(f"use torch.amp.{verb}", ((node, text),))
        if any(a.keyword is None for a in call.args):
            return None
        if verb in ("custom_fwd", "custom_bwd"):
            first = cst.Arg(cst.SimpleString(f'"{device}"'), keyword=cst.Name("device_type"), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
        else:
            first = cst.Arg(cst.SimpleString(f'"{device}"'))
        args = [first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))] if call.args else [first]
        new_call = call.with_changes(func=new_func, args=[*args, *call.args])
        return NodeFix(f'use torch.amp.{verb}("{device}", ...)', ((call, self._printer.code_for_node(new_call)),))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._imports += 1
        if node.relative or isinstance(node.names, cst.ImportStar):
            return
        from_text = dotted(node.module)
        for alias in node.names:
            name = dotted(alias.name)
            if from_text and name:
                self._flag(alias, f"{from_text}.{name}")

    def leave_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._imports -= 1

    def visit_Import(self, node: cst.Import) -> None:
        self._imports += 1

    def leave_Import(self, node: cst.Import) -> None:
        self._imports -= 1

    # -- code for old PyTorch versions --------------------------------------------------------
    def _version_test(self, test: cst.BaseExpression) -> bool:
        return bool(_VERSION_GATE.search(self._printer.code_for_node(test)))

    def _fallback(self, kind: cst.BaseExpression) -> bool:
        return any(e in self._printer.code_for_node(kind) for e in _FALLBACK_ERRORS)

    def visit_If(self, node: cst.If) -> None:
        self._gates.append(node.test)

    def leave_If(self, node: cst.If) -> None:
        self._gates.pop()

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._gates.append(node.test)

    def leave_IfExp(self, node: cst.IfExp) -> None:
        self._gates.pop()

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.type is not None:
            self._handlers.append(node.type)

    def leave_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.type is not None:
            self._handlers.pop()

    def _probe(self, node: cst.CSTNode) -> None:
        """``_ = torch.cpu.amp.autocast`` / a bare ``torch.cuda.amp.GradScaler``: a probe."""
        self._skip.add(id(node))

    def visit_Expr(self, node: cst.Expr) -> None:
        self._probe(node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if all(isinstance(t.target, cst.Name) and t.target.value == "_" for t in node.targets):
            self._probe(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._skip.add(id(node.attr))
        if not self._imports and id(node) not in self._skip:
            self._flag(node, self.ctx.resolve(node))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._skip.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self._skip.add(id(node.name))

    def visit_Name(self, node: cst.Name) -> None:
        if self._imports or id(node) in self._skip:
            return
        self._flag(node, self.ctx.resolve(node))

