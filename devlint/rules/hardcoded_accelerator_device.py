"""DEV101: a literal accelerator device."""

from __future__ import annotations

import ast

import libcst as cst

from .. import edits, settings
from ..device_scope import DeviceScope
from ..devices import ACCELERATOR, DEVICE_KEYWORDS, POSITIONAL_DEVICE_CALLS, device_arguments, is_cpu, literal_device
from ..guards import config_flag, polarity, string_value
from ..names import dotted
from ..precheck import calls_in, walk
from ..precheck import dotted as ast_dotted
from ..rule import NodeFix, Rule

_DEFAULT_SETTERS = {"torch.set_default_device", "torch.set_default_tensor_type"}


class HardcodedAcceleratorDevice(Rule):
    """A literal "cuda" (or "mps", "xpu") device outside an availability guard."""

    code = "DEV101"
    name = "hardcoded-accelerator-device"
    message = 'hardcoded device "{device}": choose the device once, with a CPU fallback'
    triggers = ('"cuda', "'cuda", '"mps', "'mps", '"xpu', "'xpu", "torch.cuda.")
    needs_torch = False  # .to("cuda") needs no import

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a default-device setter; or an accelerator literal (or the start of a built
        one: "cuda:" in an f-string, a %-template, a sum or a format; also as an arm of a
        conditional) in a device position of a call (:func:`devlint.devices.device_arguments`:
        the first positional argument of ``.to`` or of a call that may resolve to one of
        ``POSITIONAL_DEVICE_CALLS``, a ``device=``-like keyword or ``type=``), or bound to a
        name or a parameter default that some call uses in a device position, as the rule
        reports them."""
        if facts.calls_to(_DEFAULT_SETTERS):
            return True
        if not any(_accelerator_text(s) for s in facts.placed):
            return False
        used: set[str] = set()  # names in a device position
        for unit in facts.units:
            for call, _ in calls_in(unit, unit.node if unit.node is not None else facts.tree):
                for arg in _device_positions(call, facts):
                    if _accelerator_ast(arg):
                        return True
                    name = ast_dotted(arg)
                    if name is not None:
                        used.add(name)
        return bool(used) and _binds_accelerator(facts.tree, used)

    what_it_does = """
Flags a string literal naming an accelerator (`"cuda"`, `"cuda:N"`, `"mps"`, `"xpu"`) used as
a device: `torch.device("cuda")`, `.to("cuda")`, `device="cuda"` on any call,
`map_location="cuda"`, `torch.autocast("cuda")`/`device_type="cuda"`,
`torch.amp.GradScaler("cuda")`, `torch.set_default_device("cuda")`, `device_map="cuda"`,
an index built into the string (`f"cuda:{rank}"`, `"cuda:{}".format(rank)`), and a name bound
to such a literal that is then used as a device (the assignment is reported, each one where the
name is bound to a literal twice, as with `device = f"cuda:{local_rank}"` in a DDP branch).
`torch.amp.GradScaler("cuda", enabled=...)` and `torch.autocast("cuda", enabled=...)` are left
alone when the `enabled=` expression tests the device (`device.type == "cuda"`, `x.is_cuda`,
`torch.cuda.is_available()`), not when it is a plain flag (`enabled=args.amp`); so is an autocast
with `enabled=False` (it turns CUDA autocast off, using no device), and the `device_type` of
`torch.random.fork_rng`. Code in a loop or comprehension over `range(torch.cuda.device_count())`
(or a name assigned from it) and under `if n_gpus > 0:` with such a name is guarded. Code under an
availability guard (`if torch.cuda.is_available():`, `"cuda" if torch.cuda.is_available() else
"cpu"`, `if device.type == "cuda":`, a name assigned from such a test) is left alone, as are
comparisons (`x.device == torch.device("cuda")`) and strings that are not devices. A
configuration flag is no guard: `"cuda" if args.cuda else "cpu"` is reported. Setting the *global* default device or tensor type to CUDA is reported even under a
guard: it also moves tensors that library code (a DataLoader's sampler) expects on the CPU."""
    why_bad = """
The program then fails on a machine without that accelerator (a laptop, a CPU-only CI runner)
with `AssertionError: Torch not compiled with CUDA enabled` or `RuntimeError: Found no NVIDIA
driver`, although nothing in it needs CUDA. Choosing the device once and passing it along lets
the same code run on every machine: `device = torch.device("cuda" if torch.cuda.is_available()
else "cpu")`, or from torch 2.6 on, for any accelerator (CUDA, MPS, XPU),
`torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"`."""
    flagged = (
        '''model = torch.nn.Linear(4, 2).to("cuda")  # expect: DEV101
x = torch.randn(3, 4, device="cuda")  # expect: DEV101
''',
        '''DEVICE = "cuda:0"  # expect: DEV101


def run(model, x):
    return model.to(DEVICE)(x.to(DEVICE))
''',
        '''if torch.cuda.is_available():
    torch.set_default_device("cuda")  # expect: DEV101
state = torch.load("ckpt.pt", map_location="cuda")  # expect: DEV101
''',
    )
    clean = (
        '''device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 2).to(device)
x = torch.randn(3, 4, device=device)
''',
        '''import os
os.environ["CUDA_VISIBLE_DEVICES"] = "0"
if torch.cuda.is_available():
    x = torch.ones(2, device="cuda")
device = torch.device("cpu")
if device.type == "cuda":
    torch.cuda.synchronize(device="cuda")
print("running on", "cuda")
''',
        '''device = "cuda"
if not torch.cuda.is_available():
    device = "cpu"
model = torch.nn.Linear(4, 2).to(device)
''',
        '''def quantize(x, codebook, amp):
    with torch.autocast("cuda", enabled=False):  # CUDA autocast off here: no device is used
        distances = torch.cdist(x.float(), codebook.float())
    with torch.autocast("cuda", enabled=amp and x.is_cuda):  # on only where x is on CUDA
        return distances.argmin(-1)


def all_gpus():
    return [torch.device(f"cuda:{i}") for i in range(torch.cuda.device_count())]


def gpus_or_cpu():
    count = torch.cuda.device_count()
    if count == 0:
        return [torch.device("cpu")]
    return [torch.device(f"cuda:{i}") for i in range(count)]
''',
    )
    fix_safety = """
The fix is unsafe: it changes where the code runs. Where a device is already in scope (a
`device`/`dev`/`*_device` variable or parameter, `self.device`, `args.device` with a
`--device` option, the `.device` of a `forward` input), the literal is replaced by it:
`.to("cuda")` becomes `.to(device)`, `torch.autocast("cuda")` becomes
`torch.autocast(device.type)` (`torch.device(x).type` when the variable may be a string). The
device type of `torch.autocast`/`torch.amp.autocast`/`torch.amp.GradScaler` with no device in
scope (a notebook, a script: what DEV206's fix leaves), and a literal that *defines* the device (`DEVICE = "cuda:0"`,
`device = torch.device("cuda")`) become the guarded choice `"cuda" if torch.cuda.is_available() else "cpu"`; with `torch-version =
"2.6"` or later in `[tool.devlint]`, `torch.accelerator.current_accelerator().type if
torch.accelerator.is_available() else "cpu"`, which also picks MPS or XPU. Elsewhere, with no device
in scope, there is no fix: which variable to pass is the author's choice."""
    requires = (DeviceScope,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # per scope: name -> [literal node, used as device?, also bound to something else?]
        self._bindings: list[dict[str, list]] = [{}]
        self._comparing = 0  # inside `x.device == torch.device("cuda")`: a test, not a placement
        self._arms: set[int] = set()  # literals that are an arm of `"cuda" if args.cuda else "cpu"`

    # -- names bound to a literal -------------------------------------------------------------
    def _bind(self, name: str, value: cst.BaseExpression) -> None:
        scope = self._bindings[-1]
        value = self._arm(value)
        if literal_device(value) is not None and not self.ctx.guarded:
            entry = scope.get(name)
            if entry is None:
                scope[name] = [value, False, False]
            elif entry[0] is not None:
                entry.append(value)  # bound again to a literal (f"cuda:{rank}" for DDP): also reported
            return
        if name in scope:
            scope[name][2] = True  # reassigned (e.g. the "cpu" fallback): not a fixed device
        elif value is not None and (is_cpu(value) or literal_device(value) is not None):
            scope[name] = [None, False, True]

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            name = dotted(target.target)
            if name:
                self._bind(name, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        name = dotted(node.target)
        if name and node.value is not None:
            self._bind(name, node.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bindings.append({})
        for param in (*node.params.params, *node.params.kwonly_params):
            if param.default is not None:
                self._bind(param.name.value, param.default)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._flush(self._bindings.pop())

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._bindings.append({})  # class attributes: not seen by bare names in its methods

    leave_ClassDef = leave_FunctionDef

    def leave_Module(self, node: cst.Module) -> None:
        self._flush(self._bindings.pop())

    def _flush(self, scope: dict[str, list]) -> None:
        for literal, used, rebound, *more in scope.values():
            if literal is not None and used and not rebound:
                for each in (literal, *more):
                    self.report(each, _message(self.message, literal_device(each)), self._choice(each))

    def _use(self, expr: cst.BaseExpression) -> None:
        name = dotted(expr)
        if name is None:
            return
        for scope in (self._bindings[-1], self._bindings[0]):
            if name in scope:
                scope[name][1] = True
                return

    # -- literals in device positions ---------------------------------------------------------
    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._comparing += 1

    def leave_Comparison(self, node: cst.Comparison) -> None:
        self._comparing -= 1

    def visit_Call(self, node: cst.Call) -> None:
        if self._comparing:
            return
        name = self.ctx.resolve(node.func)
        if name in _DEFAULT_SETTERS and node.args:
            arg = node.args[0].value
            device = literal_device(arg) or _cuda_tensor_type(arg, self.ctx)
            if device:
                self.report(arg, _message(self.message, device), self._replace(arg, self._scope().device(), "device"))
            return
        if name in ("torch.amp.GradScaler", "torch.GradScaler") and any(
            (a.keyword is not None and a.keyword.value == "enabled" and _tests_device(a.value, self.ctx)) or a.star == "**"
            for a in node.args
        ):
            return  # enabled= (perhaps in **kwargs) decides per device; the literal names the kind
        if name in _AUTOCASTS and any(
            a.keyword is not None and a.keyword.value == "enabled" and (_false(a.value) or _tests_device(a.value, self.ctx))
            for a in node.args
        ):
            return  # autocast("cuda", enabled=False) turns CUDA autocast off; enabled=x.is_cuda only on CUDA
        if name in ("torch.amp.custom_fwd", "torch.amp.custom_bwd", "torch.random.fork_rng"):
            return  # device_type there names the autocast state to check / the generators to fork: harmless on a CPU
        for arg in device_arguments(node, self.ctx):
            arg = self._arm(arg)
            device = literal_device(arg)
            if device is None:
                self._use(arg)
            elif not self.ctx.guarded:
                self.report(arg, _message(self.message, device), self._fix(node, name, arg))

    def _arm(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        arm = _flagged_arm(expr, self.ctx)
        if arm is None:
            return expr
        self._arms.add(id(arm))
        return arm

    # -- fixes --------------------------------------------------------------------------------
    def _scope(self) -> DeviceScope:
        return self.ctx.analysis(DeviceScope)

    def _fix(self, call: cst.Call, name: str | None, literal: cst.BaseExpression) -> NodeFix | None:
        """The device in scope for the literal, or the guarded choice where it defines one."""
        if id(literal) in self._arms:  # "cuda" if args.cuda else "cpu": keep the flag, fall back
            return self._choice(literal)
        scope = self._scope()
        positional = edits.positional(call)
        first = positional[0].value if positional else None
        keyword = next((a.keyword.value for a in call.args if a.value is literal and a.keyword is not None), None)
        if name == "torch.device" and (literal is first or keyword == "type"):
            found = scope.device()
            if found is None or scope.defining():
                return self._choice(literal)
            return self._replace(call, found, "device")
        if keyword == "pin_memory_device":
            return None
        if keyword == "device_type" or (literal is first and name not in (None, "torch.set_default_device") and name.startswith("torch.")):
            if scope.device() is None and name in _AMP_DEVICE_TYPE:
                # autocast/GradScaler name a device type, none in scope (a notebook, a script):
                # the guarded choice, so that DEV206's fix to torch.amp(..."cuda") is not a dead end
                return self._choice(literal)
            return self._replace(literal, scope.device(), "type")
        return self._replace(literal, scope.device(), "device")

    def _replace(self, node: cst.CSTNode, found, kind: str) -> NodeFix | None:
        if found is None:
            return None
        text = found.as_device() if kind == "device" else found.as_type(self._scope().torch_name())
        if text is None:
            return None
        return NodeFix(f"use the device in scope: {text}", ((node, text),), safe=False)

    def _choice(self, literal: cst.BaseExpression) -> NodeFix | None:
        """``"cuda"`` -> ``"cuda" if torch.cuda.is_available() else "cpu"``."""
        torch = self._scope().torch_name()
        device = literal_device(literal)
        if torch is None or device is None:
            return None
        if settings.has_accelerator_api() and ":" not in device:  # torch-version >= 2.6: any accelerator
            text = f'{torch}.accelerator.current_accelerator().type if {torch}.accelerator.is_available() else "cpu"'
        else:
            test = _TEST[device.split(":", 1)[0]].replace("torch.", f"{torch}.", 1)
            text = f'{edits.code(literal)} if {test} else "cpu"'
        if id(literal) in self._arms:
            text = f"({text})"
        return NodeFix(f'fall back to the CPU: {text}', ((literal, text),), safe=False)


def _tests_device(expr: cst.BaseExpression, ctx) -> bool:
    """Does an ``enabled=`` expression test the device in use or its availability
    (``device.type == "cuda"``, ``torch.cuda.is_available()``, ``use_amp and use_cuda`` with
    ``use_cuda`` assigned from such a test)? A plain flag (``enabled=args.amp``) does not
    (RULES.md: only an ``enabled=`` that tests the device excuses ``GradScaler("cuda")``)."""
    if polarity(expr, ctx) != 0:
        return True
    return any(_tests_device(child, ctx) for child in expr.children if isinstance(child, cst.BaseExpression))


def _flagged_arm(expr: cst.BaseExpression, ctx) -> cst.BaseExpression | None:
    """``"cuda" if args.cuda else "cpu"``: the accelerator literal of a conditional expression
    whose test is a configuration flag (``args.cuda``, ``cfg.use_gpu``), which does not guard."""
    if isinstance(expr, cst.IfExp) and config_flag(expr.test, ctx):
        for arm in (expr.body, expr.orelse):
            if literal_device(arm) is not None:
                return arm
    return None


#: autocast regions, whose ``enabled=False`` or device test makes a literal device type harmless
_AUTOCASTS = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})


def _false(expr: cst.BaseExpression) -> bool:
    return expr.__class__ is cst.Name and expr.value == "False"


#: Calls whose first argument is a device *type* that the guarded choice may replace.
_AMP_DEVICE_TYPE = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.GradScaler", "torch.GradScaler"})

_TEST = {
    "cuda": "torch.cuda.is_available()",
    "mps": "torch.backends.mps.is_available()",
    "xpu": "torch.xpu.is_available()",
}
def _message(template: str, device: str) -> str:
    """The message for ``device`` (under 80 characters with the code: the guarded choice to
    write is in the rule's docs and its fix)."""
    return template.format(device=device)


def _cuda_tensor_type(node: cst.CSTNode, ctx) -> str | None:
    """``"torch.cuda.FloatTensor"`` or ``torch.cuda.FloatTensor`` -> ``"cuda"``."""
    value = string_value(node)
    if value is None:
        value = ctx.resolve(node) or ""
    return "cuda" if value.startswith("torch.cuda.") else None


# -- the pre-check's reading of the stdlib ``ast`` ---------------------------------------------
def _accelerator_text(value) -> bool:
    """An accelerator literal or the start of a built one (``"cuda:"``)?"""
    return value.__class__ is str and (bool(ACCELERATOR.match(value)) or value.startswith(("cuda:", "xpu:", "mps:")))


def _accelerator_ast(node) -> bool:
    """Could ``node`` (stdlib ``ast``) be what :func:`devlint.devices.literal_device` names, or
    a conditional with such an arm: a string, an f-string's head, a ``%``/``+`` template or a
    ``.format`` receiver that is an accelerator literal or starts like one?"""
    t = node.__class__
    if t is ast.Constant:
        return _accelerator_text(node.value)
    if t is ast.JoinedStr:
        return bool(node.values) and node.values[0].__class__ is ast.Constant and _accelerator_text(node.values[0].value)
    if t is ast.IfExp:
        return _accelerator_ast(node.body) or _accelerator_ast(node.orelse)
    if t is ast.BinOp:
        return _accelerator_ast(node.left)
    if t is ast.Call and node.func.__class__ is ast.Attribute and node.func.attr == "format":
        return _accelerator_ast(node.func.value)
    return False


def _device_positions(call: ast.Call, facts) -> list:
    """The arguments of ``call`` that :func:`devlint.devices.device_arguments` may read as a
    device (over-approximated: any ``.to``, any call named ``type=``)."""
    found = []
    func = call.func
    first = next((a for a in call.args if a.__class__ is not ast.Starred), None)
    if first is not None and ((func.__class__ is ast.Attribute and func.attr == "to")
                              or not facts.resolve(func).isdisjoint(POSITIONAL_DEVICE_CALLS)):
        found.append(first)
    for kw in call.keywords:
        if kw.arg in DEVICE_KEYWORDS or kw.arg == "type":
            found.append(kw.value)
    return found


def _binds_accelerator(tree, names: set[str]) -> bool:
    """Does the file bind one of ``names`` (dotted) to an accelerator literal, by an assignment
    or as a parameter's default (the rule's ``_bind``)?"""
    for node in walk(tree):
        t = node.__class__
        if t is ast.Assign:
            if _accelerator_ast(node.value) and any(ast_dotted(target) in names for target in node.targets):
                return True
        elif t is ast.AnnAssign:
            if node.value is not None and _accelerator_ast(node.value) and ast_dotted(node.target) in names:
                return True
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            a = node.args
            pairs = [*zip(reversed([*a.posonlyargs, *a.args]), reversed(a.defaults)),
                     *((p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)]
            if any(p.arg in names and _accelerator_ast(d) for p, d in pairs):
                return True
    return False
