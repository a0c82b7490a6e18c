"""DEV206: the deprecated ``torch.cuda.amp``/``torch.cpu.amp`` API."""

from __future__ import annotations

import re
from typing import NamedTuple

import libcst as cst

from .. import edits
from ..names import dotted
from ..rule import NodeFix, Rule

#: deprecated name -> its ``torch.amp`` replacement
REPLACEMENTS = {
    "torch.cuda.amp.autocast": 'torch.amp.autocast("cuda")',
    "torch.cuda.amp.autocast_mode.autocast": 'torch.amp.autocast("cuda")',
    "torch.cuda.amp.GradScaler": 'torch.amp.GradScaler("cuda")',
    "torch.cuda.amp.grad_scaler.GradScaler": 'torch.amp.GradScaler("cuda")',
    "torch.cuda.amp.custom_fwd": 'torch.amp.custom_fwd(device_type="cuda")',
    "torch.cuda.amp.custom_bwd": 'torch.amp.custom_bwd(device_type="cuda")',
    "torch.cpu.amp.autocast": 'torch.amp.autocast("cpu")',
    "torch.cpu.amp.autocast_mode.autocast": 'torch.amp.autocast("cpu")',
    "torch.cpu.amp.GradScaler": 'torch.amp.GradScaler("cpu")',
    "torch.cpu.amp.grad_scaler.GradScaler": 'torch.amp.GradScaler("cpu")',
}


#: deprecated module -> the device type it implies
_AMP_MODULES = {
    "torch.cuda.amp": "cuda", "torch.cpu.amp": "cpu",
    "torch.cuda.amp.autocast_mode": "cuda", "torch.cpu.amp.autocast_mode": "cpu",
    "torch.cuda.amp.grad_scaler": "cuda", "torch.cpu.amp.grad_scaler": "cpu",
}
#: the names torch.amp also has (every name the deprecated modules export)
_NEW_NAMES = ("autocast", "GradScaler", "custom_fwd", "custom_bwd")
#: the last name of every callee a fix may rewrite (``_use_edit``'s ``verb``): the calls of other
#: attributes are not kept
_VERBS = frozenset({*_NEW_NAMES, *(name.rsplit(".", 1)[-1] for name in REPLACEMENTS)})
#: the positional parameters of the deprecated autocast classes, which torch.amp.autocast
#: takes after device_type in another order
_AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")


class _Group(NamedTuple):
    """An import of a deprecated module or of names from it, to rewrite with its uses."""

    module: cst.CSTNode  # the node naming the module (replaced by new_module)
    new_module: str
    device: str
    names: dict  # local name -> imported name (None: the module itself)
    gated: bool


def _call_text(call: cst.Call, verb: str, device: str, func_text: str) -> str | None:
    """The call rewritten for the ``torch.amp`` signature, or ``None`` where it cannot be."""
    if any(a.keyword is not None and a.keyword.value in ("device_type", "device") for a in call.args):
        return None
    literal = edits.arg(f'"{device}"')
    if verb == "autocast":
        if any(a.star == "*" for a in call.args):
            return None
        args, index = [literal], 0
        for a in call.args:
            if a.keyword is None and not a.star:
                if index >= len(_AUTOCAST_POSITIONAL):
                    return None
                a = edits.as_keyword(a, _AUTOCAST_POSITIONAL[index])
                index += 1
            args.append(a)
        return edits.call(call, args, func_text)
    if verb == "GradScaler":  # GradScaler(device, init_scale, ...): the old positions shift by one
        return edits.call(call, [literal, *call.args], func_text)
    keyword = edits.arg(f'"{device}"', "device_type")  # custom_fwd(fwd=None, *, device_type, cast_inputs=None)
    at = max((i + 1 for i, a in enumerate(call.args) if a.keyword is None), default=0)
    return edits.call(call, [*call.args[:at], keyword, *call.args[at:]], func_text)


#: An ``if`` test that checks the torch version: the deprecated spelling there is a fallback.
_VERSION_GATE = re.compile(r"version|TORCH_(GREATER|LESS|VERSION)|TORCH_\d|torch_\d", re.I)
_FALLBACK_ERRORS = ("ImportError", "ModuleNotFoundError", "AttributeError")


#: The fields of a compound statement that hold statements, blocks or clauses of them.
_STATEMENT_FIELDS = ("body", "orelse", "handlers", "finalbody", "cases")


def _imported_names(body, remembered=None) -> tuple[set[str], set[str]]:
    """(every name an ``import`` anywhere in these statements binds or names, nested blocks
    included (an expression holds no statement, so only statements are walked): the only
    names that resolve through the imports, and so the only ones ``visit_Name`` looks at;
    the local names bound by the imports that name ``amp``: every name a fix group may bind).
    ``remembered`` (:meth:`devlint.context.Context.remembered`) keeps them for each top-level
    statement and each member of a top-level class between lints: a keystroke inside a long
    class walks only the member it changed."""
    found: set[str] = set()
    amp: set[str] = set()
    for statement in body:
        block = statement.body if statement.__class__ is cst.ClassDef and remembered is not None else None
        parts = block.body if block.__class__ is cst.IndentedBlock else (statement,)
        for part in parts:
            names, locals_ = remembered("imported-names", part, lambda part=part: _names_under((part,))) if remembered \
                else _names_under((part,))
            found |= names
            amp |= locals_
    return found, amp


def _names_under(body) -> tuple[frozenset[str], frozenset[str]]:
    """:func:`_imported_names` of ``body``, walked whole."""
    found: set[str] = set()
    amp: set[str] = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        kind = node.__class__
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            for small in node.body:
                small_kind = small.__class__
                if small_kind is cst.Import or (small_kind is cst.ImportFrom and small.names.__class__ is not cst.ImportStar):
                    names = [(dotted(alias.name) or "", alias) for alias in small.names]
                    module = (dotted(small.module) or "") if small_kind is cst.ImportFrom else ""
                    named = "amp" in module or any("amp" in name for name, _ in names)
                    for name, alias in names:
                        found.add(name.split(".", 1)[0])
                        local = name.split(".", 1)[0]
                        if alias.asname is not None and alias.asname.name.__class__ is cst.Name:
                            local = alias.asname.name.value
                            found.add(local)
                        if named:
                            amp.add(local)
            continue
        for name in _STATEMENT_FIELDS:
            value = getattr(node, name, None)
            if value.__class__ is list or value.__class__ is tuple:
                stack.extend(value)
            elif value is not None:
                stack.append(value)
    return frozenset(found), frozenset(amp)


class DeprecatedAmpApi(Rule):
    """The deprecated `torch.cuda.amp` / `torch.cpu.amp` autocast, GradScaler and custom_fwd/bwd."""

    code = "DEV206"
    name = "deprecated-amp-api"
    message = "{name} is deprecated: use {replacement}"
    triggers = ("cuda.amp", "cpu.amp", "import amp")

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: an import of, or an attribute chain through, ``torch.cuda.amp``/``torch.cpu.amp``."""
        old = ("torch.cuda.amp", "torch.cpu.amp")
        if any(m.startswith(old) for m in (*facts.modules, *facts.imported)):
            return True
        return any(facts.resolve(node) & set(old) for node in facts.attributes.get("amp", ()))

    what_it_does = """
Flags each import and each use of `torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`,
`torch.cuda.amp.custom_fwd`/`custom_bwd`, `torch.cpu.amp.autocast` and
`torch.cpu.amp.GradScaler`, in any spelling (`torch.cuda.amp.X`, `from torch.cuda.amp import
X`, `from torch.cuda import amp` then `amp.X`, `import torch.cuda.amp as amp`, as a call, a
decorator or an annotation), and `from torch.cuda.amp import *`. The message names the
`torch.amp` replacement. `torch.amp.*` and `torch.autocast` are left alone,
as is code that supports old PyTorch versions on purpose: the deprecated spelling on either
arm of a version test (`torch.amp.GradScaler("cuda") if _TORCH_GREATER_EQUAL_2_4 else
torch.cuda.amp.GradScaler()`, `if is_torch_version(">=", "2.3"): ... else: ...`), in an
`except ImportError`/`except AttributeError` fallback, and a bare reference that probes for
the name (`_ = torch.cpu.amp.autocast` in a `try`). A version test may be a name assigned from
one (`HAS_DEVICE = version.parse(torch.__version__) >= ...`); a name such a fallback imports
that another import binds too (`from torch.amp import GradScaler` on the other arm) is left
alone where it is used."""
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
        '''from packaging import version

SCALER_TAKES_DEVICE = version.parse(torch.__version__).release >= (2, 3)
if SCALER_TAKES_DEVICE: from torch.amp import GradScaler
else: from torch.cuda.amp import GradScaler


def make_scaler(enabled: bool) -> GradScaler:
    if SCALER_TAKES_DEVICE:
        return GradScaler("cuda" if torch.cuda.is_available() else "cpu", enabled=enabled)
    return GradScaler(enabled=enabled)
''',
    )
    fix_safety = """
The fix is safe: the deprecated classes are thin wrappers that pass the device type to the
`torch.amp` ones, so `torch.cuda.amp.GradScaler(init_scale=1024)` and
`torch.amp.GradScaler("cuda", init_scale=1024)` behave identically. Every spelling is fixed:
`torch.cuda.amp.X(...)` becomes `torch.amp.X("cuda", ...)`; `from torch.cuda.amp import
autocast, GradScaler` becomes `from torch.amp import autocast, GradScaler` together with every
use (`autocast()` -> `autocast("cuda")`), and likewise `import torch.cuda.amp as amp` and
`from torch.cuda import amp` (-> `from torch import amp`). Positional arguments are carried
over: `autocast(True, torch.float16)` becomes `autocast("cuda", enabled=True,
dtype=torch.float16)` (the new signature puts `device_type` first), `GradScaler(1024.0)`
becomes `GradScaler("cuda", 1024.0)`, `@custom_fwd(cast_inputs=torch.float16)` becomes
`@custom_fwd(device_type="cuda", cast_inputs=torch.float16)`. An import is rewritten only with
all of its uses in one fix; where one use cannot be rewritten (the name passed around as a
value, `*args`), or the name is also bound by a fallback import, nothing is changed.
`from torch.cuda.amp import *` has no fix (which names it brings is unknown).

The fixed call keeps the device type the old one implied, `"cuda"`, which DEV101 then reports
with its own (unsafe) fix to the device in scope: with `--unsafe-fixes` both apply and
`torch.cuda.amp.autocast()` ends as `torch.amp.autocast(device.type)`."""

    #: ids of the nodes visited (read for the node being visited), or what leave_Module reads
    walk_logs = ("_skip", "_calls", "_parents", "_refs", "_ref_chains", "_decorators", "_found", "_memo")

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._skip: set[int] = set()
        self._imports = 0
        self._gates: list[cst.BaseExpression] = []  # tests of the enclosing if/else
        self._handlers: list[cst.BaseExpression] = []  # types of the enclosing except clauses
        self._printer = cst.Module(body=[])
        self._calls: dict[int, cst.Call] = {}  # id(call.func) -> call
        # -- for the fixes --
        self._found: list[tuple[cst.CSTNode, str | None, str, int]] = []  # (node, name, message, statement)
        self._decorators: set[int] = set()  # id() of decorator expressions
        self._parents: dict[int, cst.Attribute] = {}  # id(value) -> the attribute it is the value of
        self._refs: dict[str, list[cst.Name]] = {}  # local name -> its references outside imports
        self._groups: list[_Group] = []
        self._bound: dict[str, int] = {}  # local name -> how many imports bind it
        #: local name -> the gate chains it is used under (see ``_chain``), judged in leave_Module
        #: for the names an import group binds only: judging every name's gates as it is
        #: visited printed every ``if`` test holding a name
        self._ref_chains: dict[str, dict[int, tuple]] = {}
        #: the local names imports that name ``amp`` bind (set in visit_Module): the only ones
        #: whose uses ``_refs`` and ``_ref_chains`` keep
        self._amp_locals: set[str] = set()
        #: the enclosing tests and except types, innermost first: (node, is a handler, outer chain)
        self._chain: tuple | None = None
        self._memo: dict[int, bool] = {}  # id(test or except type) -> does it gate?

    def visit_Module(self, node: cst.Module) -> None:
        # most names of a file are never imported, and visit_Name has nothing to do with them
        self.wanted_names, self._amp_locals = _imported_names(node.body, self.ctx.remembered)

    def _flag(self, node: cst.CSTNode, name: str | None) -> None:
        replacement = REPLACEMENTS.get(name or "")
        if replacement is None:
            return
        if self._gated():
            return
        # reported when the module is left, once every use is known (the fixes need them all)
        short = name.replace(".autocast_mode", "").replace(".grad_scaler", "")
        message = self.fitted(self.message.format(name=name, replacement=replacement),
                              self.message.format(name=short, replacement=replacement),
                              self.message.format(name=short.removeprefix("torch."), replacement=replacement),
                              self.message.format(name=short, replacement=replacement.split("(")[0]))
        self._found.append((node, name, message, self.ctx.statement_index))

    def _gated(self) -> bool:
        """Inside a version test or an import fallback? (Each test is printed once: this runs
        for every name.)"""
        memo = self._memo
        for test in self._gates:
            if id(test) not in memo:
                memo[id(test)] = self._version_test(test)
            if memo[id(test)]:
                return True
        for kind in self._handlers:
            if id(kind) not in memo:
                memo[id(kind)] = self._fallback(kind)
            if memo[id(kind)]:
                return True
        return False

    def visit_Call(self, node: cst.Call) -> None:
        # kept only for what ``_use_edit`` looks up: a use of an imported name, or an attribute
        # ending in one of the verbs (most calls of a file are neither)
        func = node.func
        kind = func.__class__
        if (kind is cst.Name and func.value in self.wanted_names) or (kind is cst.Attribute and func.attr.value in _VERBS):
            self._calls[id(func)] = node

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._imports += 1
        if node.relative:
            return
        from_text = dotted(node.module)
        if isinstance(node.names, cst.ImportStar):
            if from_text in _AMP_MODULES and not self._gated():
                message = self.fitted(*(self.message.format(name=f"from {from_text} import *", replacement=r)
                                       for r in ("torch.amp, importing each name", "torch.amp")))
                self._found.append((node, None, message, self.ctx.statement_index))
            return
        for alias in node.names:
            name = dotted(alias.name)
            if from_text and name:
                self._flag(alias, f"{from_text}.{name}")
        self._group_from(node, from_text)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._decorators.update(id(d.decorator) for d in node.decorators)

    visit_ClassDef = visit_FunctionDef

    def leave_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._imports -= 1

    def visit_Import(self, node: cst.Import) -> None:
        self._imports += 1
        for alias in node.names:
            full = dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else None
            if local is None:
                continue
            self._bound[local] = self._bound.get(local, 0) + 1
            if full in _AMP_MODULES:
                self._groups.append(_Group(alias.name, "torch.amp", _AMP_MODULES[full], {local: None}, self._gated()))

    def _group_from(self, node: cst.ImportFrom, module: str | None) -> None:
        """Record what ``from torch.cuda.amp import X`` / ``from torch.cuda import amp`` binds."""
        names: dict[str, str | None] = {}
        for alias in node.names:
            name = dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            if local:
                self._bound[local] = self._bound.get(local, 0) + 1
                names[local] = name
        if module in _AMP_MODULES:
            if all(n in _NEW_NAMES for n in names.values()):
                self._groups.append(_Group(node.module, "torch.amp", _AMP_MODULES[module], names, self._gated()))
        elif module in ("torch.cuda", "torch.cpu") and all(n == "amp" for n in names.values()):
            self._groups.append(_Group(node.module, "torch", module[6:], dict.fromkeys(names), self._gated()))

    def leave_Import(self, node: cst.Import) -> None:
        self._imports -= 1

    # -- code for old PyTorch versions --------------------------------------------------------
    def _version_test(self, test: cst.BaseExpression) -> bool:
        if _VERSION_GATE.search(self._printer.code_for_node(test)):
            return True
        if test.__class__ is cst.UnaryOperation:
            test = test.expression
        if test.__class__ is not cst.Name:
            return False
        # HAS_DEVICE_ARG = version.parse(torch.__version__) >= ...: a flag set from the version
        self.ctx.note_read(None)  # the whole text
        bound = re.search(rf"^[ \t]*{re.escape(test.value)}[ \t]*(:[^=\n]*)?=(?!=)(.*)$", self.ctx.text, re.M)
        return bound is not None and bool(_VERSION_GATE.search(bound.group(2)))

    def _fallback(self, kind: cst.BaseExpression) -> bool:
        return any(e in self._printer.code_for_node(kind) for e in _FALLBACK_ERRORS)

    def visit_If(self, node: cst.If) -> None:
        self._gates.append(node.test)
        self._chain = (node.test, False, self._chain)

    def leave_If(self, node: cst.If) -> None:
        self._gates.pop()
        self._chain = self._chain[2]

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._gates.append(node.test)
        self._chain = (node.test, False, self._chain)

    def leave_IfExp(self, node: cst.IfExp) -> None:
        self._gates.pop()
        self._chain = self._chain[2]

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.type is not None:
            self._handlers.append(node.type)
            self._chain = (node.type, True, self._chain)

    def leave_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.type is not None:
            self._handlers.pop()
            self._chain = self._chain[2]

    def _chain_gated(self, chain: tuple | None) -> bool:
        """:meth:`_gated` for a chain saved by ``visit_Name`` (same tests, same memo)."""
        memo = self._memo
        while chain is not None:
            node, handler, chain = chain
            if id(node) not in memo:
                memo[id(node)] = self._fallback(node) if handler else self._version_test(node)
            if memo[id(node)]:
                return True
        return False

    def _probe(self, node: cst.CSTNode) -> None:
        """``_ = torch.cpu.amp.autocast`` / a bare ``torch.cuda.amp.GradScaler``: a probe."""
        self._skip.add(id(node))

    def visit_Expr(self, node: cst.Expr) -> None:
        self._probe(node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if all(isinstance(t.target, cst.Name) and t.target.value == "_" for t in node.targets):
            self._probe(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # visit_Name reads ``_skip`` and leave_Module ``_parents`` for imported names only
        wanted = self.wanted_names
        if node.attr.value in wanted:
            self._skip.add(id(node.attr))
        value = node.value
        if value.__class__ is cst.Name and value.value in wanted:
            self._parents[id(value)] = node
        if not self._imports and id(node) not in self._skip:
            self._flag(node, self.ctx.resolve(node))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value in self.wanted_names:
            self._skip.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        if node.name.value in self.wanted_names:
            self._skip.add(id(node.name))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in self.wanted_names or self._imports or id(node) in self._skip:
            return
        if node.value in self._amp_locals:  # leave_Module reads the uses of what a fix group binds only
            self._refs.setdefault(node.value, []).append(node)
            chain = self._chain
            if chain is not None:
                self._ref_chains.setdefault(node.value, {})[id(chain)] = chain
        self._flag(node, self.ctx.resolve(node))

    # -- reports and fixes --------------------------------------------------------------------
    def leave_Module(self, node: cst.Module) -> None:
        fixes: dict[int, NodeFix] = {}
        for group in self._groups:
            fix = self._group_fix(group)
            if fix is None:
                continue
            fixes[id(group.module)] = fix
            for local, name in group.names.items():
                for ref in self._refs.get(local, ()):
                    fixes[id(ref) if name is not None else id(self._parents.get(id(ref), ref))] = fix
        # from torch.cuda.amp import GradScaler only as the old-torch arm of a version test, the
        # name bound by another import too: its uses name whichever the running torch has
        fallback = {local for group in self._groups if group.gated for local in group.names if self._bound.get(local, 0) > 1}
        ctx = self.ctx
        saved = ctx.statement_index
        try:
            for found, name, message, top in self._found:
                if found.__class__ is cst.Name and found.value in fallback:
                    continue
                ctx.statement_index = top  # the statement holding the node (see FrameRule.report_at)
                fix = fixes.get(id(found))
                if fix is None and isinstance(found, cst.ImportAlias):
                    fix = fixes.get(id(self._module_of(found)))
                if fix is None and name is not None:
                    fix = self._attribute_fix(found, name)
                self.report(found, message, fix)
        finally:
            ctx.statement_index = saved

    def _module_of(self, alias: cst.ImportAlias) -> cst.CSTNode | None:
        """The module node of the from-import group an imported alias belongs to."""
        local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else dotted(alias.name)
        for group in self._groups:
            if local in group.names and group.names[local] is not None:
                return group.module
        return None

    def _group_fix(self, group: "_Group") -> NodeFix | None:
        """One fix for an import and every use of what it binds: ``from torch.cuda.amp import
        autocast`` -> ``from torch.amp import autocast`` with ``autocast()`` -> ``autocast("cuda")``.
        ``None`` when any use cannot be rewritten (the import alone would break it)."""
        if group.gated:
            return None
        replacements: list[tuple[cst.CSTNode, str]] = [(group.module, group.new_module)]
        for local, name in group.names.items():
            if self._bound.get(local, 0) != 1 or any(map(self._chain_gated, self._ref_chains.get(local, {}).values())):
                return None  # bound by another import too, or used by code for old torch: leave it
            for ref in self._refs.get(local, ()):
                target: cst.CSTNode = ref
                verb = name
                if name is None:  # the module: its uses are amp.X
                    parent = self._parents.get(id(ref))
                    if parent is None or parent.attr.value not in _NEW_NAMES:
                        return None
                    target, verb = parent, parent.attr.value
                edit = self._use_edit(target, verb, group.device, self._printer.code_for_node(target))
                if edit is False:
                    return None
                if edit is not None:
                    replacements.append(edit)
        return NodeFix(f'import from {group.new_module} and pass the device type "{group.device}"', tuple(replacements))

    def _use_edit(self, func: cst.CSTNode, verb: str, device: str, func_text: str):
        """The edit of one use of ``verb`` (autocast, GradScaler, custom_fwd/bwd) spelled
        ``func_text``: ``None`` when it needs none, ``False`` when it cannot be rewritten."""
        call = self._calls.get(id(func))
        if call is not None:
            text = _call_text(call, verb, device, func_text)
            return False if text is None else (call, text)
        if id(func) in self._decorators and verb in ("custom_fwd", "custom_bwd"):
            return (func, f'{func_text}(device_type="{device}")')
        return None if verb == "GradScaler" else False  # isinstance(s, GradScaler) stays true

    def _attribute_fix(self, node: cst.CSTNode, name: str) -> NodeFix | None:
        """``T.cuda.amp.GradScaler(init_scale=2.0**16)`` -> ``T.amp.GradScaler("cuda", init_scale=2.0**16)``."""
        if not isinstance(node, cst.Attribute):
            return None
        parts = name.split(".")  # torch.<device>.amp[.autocast_mode|.grad_scaler].X
        head = node
        for _ in range(len(parts) - 3):
            head = head.value if isinstance(head, cst.Attribute) else None
        # head is now <T>.<device>.amp
        if not isinstance(head, cst.Attribute) or not isinstance(head.value, cst.Attribute):
            return None
        root = head.value.value
        if not isinstance(root, cst.Name) or self.ctx.resolve(root) != "torch":
            return None  # spelled through a module alias: the import's group fix covers it
        device, verb = parts[1], parts[-1]
        func_text = f"{root.value}.amp.{verb}"
        edit = self._use_edit(node, verb, device, func_text)
        if edit is None:  # a GradScaler that is not called: the name alone changes
            edit = (node, func_text)
        if edit is False:
            return None
        return NodeFix(f'use torch.amp.{verb} with the device type "{device}"', (edit,))

