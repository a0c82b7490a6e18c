"""The shared device dataflow of the DEV11x rules: which names hold what, on which device.

One :class:`DeviceFlow` per file, fed by the engine's single traversal (no second parse, no
metadata providers). It keeps a *frame* per module body and per function: a map from local
names to a :class:`V` (a value's kind), updated statement by statement in source order, with
the two branches of an ``if`` joined (a name whose kind differs between them becomes unknown).
``self.<attr>`` bindings are kept per class, so an attribute set in ``__init__`` is seen by the
class's later methods.

Kinds:

* ``CPU``: a tensor known to be on the CPU (a factory call without ``device=``, ``torch.tensor``
  of a list, ``torch.from_numpy``, an item of a CPU batch, a same-module function whose every
  ``return`` is CPU-side);
* ``DEV``: a tensor or module known to be on *the* device (``.to(device)``, ``.cuda()``,
  ``device=``, a moved model's output, ``*_like``/``x.new_*`` of such a tensor);
* ``CPUB``/``DEVB``: a batch (dict, tuple, list, tokenizer output) of such tensors;
* ``LOADER``: a ``DataLoader`` (iterating it yields CPU batches);
* ``MODEL``: a module that was not moved (``nn.Linear(...)``, a local ``nn.Module`` class);
* ``INP``: inside ``forward``, an input or a parameter/buffer of the module (on the module's
  device, whatever it is);
* ``CPUDEV``: a device object or string that names the CPU.

Anything else, a parameter, a helper's return value, an unresolved call, is unknown (``None``)
and never leads to a finding.
"""

from __future__ import annotations

import re

import libcst as cst

from .guards import string_value
from .modules import is_module_base
from .names import dotted
from .rule import Analysis

CPU, DEV, CPUB, DEVB, LOADER, MODEL, INP, CPUDEV = "cpu", "dev", "cpub", "devb", "loader", "model", "inp", "cpudev"
TENSORS = (CPU, DEV, INP)

#: torch factories that allocate on the default (CPU) device unless given ``device=``.
FACTORIES = frozenset(
    "zeros ones empty full arange range randn rand randint randperm eye linspace logspace "
    "normal bernoulli multinomial tril_indices triu_indices".split()
)
DTYPES = frozenset(
    "float16 half bfloat16 float32 float float64 double int8 uint8 int16 short int32 int int64 long "
    "bool complex64 cfloat complex128 cdouble float8_e4m3fn float8_e5m2".split()
)
#: Methods of a tensor whose result is no tensor (or not one on the same device).
_READOUTS = frozenset(
    "item tolist numpy size dim numel ndimension nelement element_size data_ptr get_device stride "
    "is_contiguous is_floating_point storage untyped_storage keys __len__ type".split()
)
_VIEWS = frozenset("T mT H mH data real imag grad".split())
_TENSOR_META = frozenset("shape device dtype ndim is_cuda requires_grad layout names".split())
#: Methods of a module that return the module itself.
_SELF_METHODS = frozenset("eval train float half double bfloat16 requires_grad_ share_memory".split())
_PASSTHROUGH_ITER = frozenset({"tqdm", "iter", "list", "tuple", "sorted", "reversed", "trange_over"})
_SCATTERS = ("DataParallel", "DistributedDataParallel")
_MODULE_NAME = re.compile(r"(model|net|module|encoder|decoder|backbone|classifier)", re.I)
_SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "Optional[int]", "Optional[float]", "Optional[bool]"})


class V:
    """A value's kind; ``origins`` are the factory calls a CPU tensor comes from; ``module``
    marks a module (as opposed to a tensor); ``explicit`` a tensor placed by ``.cpu()``."""

    __slots__ = ("kind", "origins", "module", "loss", "explicit")

    def __init__(self, kind: str, origins: tuple = (), module: bool = False, loss: bool = False, explicit: bool = False) -> None:
        self.kind, self.origins, self.module, self.loss, self.explicit = kind, origins, module, loss, explicit

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"V({self.kind}{', module' if self.module else ''}{', loss' if self.loss else ''})"


class ClassInfo:
    """What a class body tells: its ``self.`` attributes, methods, and what it derives from."""

    __slots__ = ("name", "attrs", "methods", "is_module", "silent", "param_attrs", "torch_modules", "node")

    def __init__(self, node: cst.ClassDef, is_module: bool, silent: bool) -> None:
        self.node, self.name = node, node.name.value
        self.attrs: dict[str, V | None] = {}
        self.methods = {s.name.value for s in node.body.body if isinstance(s, cst.FunctionDef)} if isinstance(node.body, cst.IndentedBlock) else set()
        self.is_module, self.silent = is_module, silent
        self.param_attrs: set[str] = set()
        #: attributes holding a ``torch.nn`` layer (which does not move its inputs itself)
        self.torch_modules: set[str] = set()


class Frame:
    """A module body or a function body."""

    __slots__ = ("vars", "parent", "cls", "self_name", "node", "name", "returns", "moved", "silent", "forward", "kind")

    def __init__(self, kind: str, node, parent: "Frame | None", cls: ClassInfo | None, self_name: str | None) -> None:
        self.kind, self.node, self.parent, self.cls, self.self_name = kind, node, parent, cls, self_name
        self.name = getattr(getattr(node, "name", None), "value", "<module>")
        self.vars: dict[str, V | None] = {}
        self.returns: list[V | None] = []
        self.moved = False
        self.silent = bool(parent and parent.silent) or bool(cls and cls.silent)
        self.forward = bool(cls and cls.is_module and self.name == "forward" and self_name)


class DeviceFlow(Analysis):
    """Scope-level device dataflow (see the module docstring)."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.frame = Frame("module", None, None, None, None)
        self.classes: list[ClassInfo] = []
        self.local_modules: set[str] = set()
        self.summaries: dict[str, V] = {}
        self._branches: list[list] = []
        self._memo: dict[int, V | None] = {}
        text = ctx.text
        self.file_silent = (".prepare(" in text and "accelerat" in text) or "setup_dataloaders" in text or "Fabric(" in text

    # ---- queries ------------------------------------------------------------------------
    @property
    def silent(self) -> bool:
        """True where a framework places the data (Lightning methods, ``accelerate``)."""
        return self.file_silent or self.frame.silent

    @property
    def cls(self) -> ClassInfo | None:
        return self.frame.cls

    def lookup(self, name: str) -> V | None:
        frame = self.frame
        if name in frame.vars:
            return frame.vars[name]
        frame = frame.parent
        while frame is not None:  # closures: objects (models, loaders), never tensors
            if name in frame.vars:
                v = frame.vars[name]
                if v is not None and (v.kind in (MODEL, LOADER, CPUDEV) or v.module):
                    return v
                return None
            frame = frame.parent
        return None

    def self_attr(self, attr: str) -> V | None:
        frame, cls = self.frame, self.frame.cls
        if cls is None:
            return None
        if frame.forward:
            return V(INP) if attr in cls.param_attrs else None
        return cls.attrs.get(attr)

    def is_loss_function(self, func: cst.BaseExpression) -> bool:
        name = self.ctx.resolve(func) or ""
        if not name.startswith("torch.nn.functional."):
            return False
        last = name.rsplit(".", 1)[-1]
        return "loss" in last or "entropy" in last or last == "kl_div"

    def receives_cpu(self, call: cst.Call) -> bool:
        """DEV111: is ``call`` a moved model (or a loss on a device tensor) given a CPU tensor?"""
        if self.silent or not call.args:
            return False
        func = call.func
        callee = None
        if isinstance(func, cst.Name):
            callee = self.lookup(func.value)
        elif isinstance(func, cst.Attribute):
            if self.is_self(func.value):
                callee = self.self_attr(func.attr.value)
            elif func.attr.value in ("generate", "forward"):
                receiver = self.value(func.value)
                callee = receiver if receiver is not None and receiver.module else None
        loss = (callee is not None and callee.loss) or (callee is None and self.is_loss_function(func))
        if callee is None and not loss:
            return False
        cpu = dev = False
        for arg in call.args:
            v = self.value(arg.value)
            if v is None or v.explicit or v.module:
                continue
            if v.kind == CPU or (v.kind == CPUB and (arg.star or not loss)):
                cpu = True
            elif v.kind in (DEV, DEVB):
                dev = True
        if loss and (callee is None or callee.kind != DEV):
            return cpu and dev
        return cpu and callee is not None and callee.kind == DEV

    def is_self(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Name) and self.frame.self_name is not None and expr.value == self.frame.self_name

    def value(self, expr: cst.BaseExpression | None, env: dict | None = None) -> V | None:
        """The kind of ``expr`` in the current frame (``None``: unknown)."""
        if expr is None:
            return None
        if env is None:
            key = id(expr)
            memo = self._memo
            if key in memo:
                return memo[key]
            v = memo[key] = self._value(expr, None)
            return v
        return self._value(expr, env)

    def _value(self, expr, env) -> V | None:
        t = type(expr)
        if t is cst.Name:
            if env is not None and expr.value in env:
                return env[expr.value]
            return self.lookup(expr.value)
        if t is cst.Attribute:
            return self._attribute(expr, env)
        if t is cst.Subscript:
            base = self.value(expr.value, env)
            if base is None:
                return None
            if base.kind == CPUB:
                return V(CPU)
            if base.kind == DEVB:
                return V(DEV)
            if base.kind in TENSORS and not base.module:
                return base
            return None
        if t is cst.Call:
            return self._call(expr, env)
        if t is cst.BinaryOperation:
            return self._combine((expr.left, expr.right), env)
        if t is cst.Comparison:
            return self._combine((expr.left, *(c.comparator for c in expr.comparisons)), env)
        if t is cst.UnaryOperation:
            v = self.value(expr.expression, env)
            return v if v is not None and v.kind in TENSORS else None
        if t in (cst.Tuple, cst.List):
            return self._container([e.value for e in expr.elements], [isinstance(e, cst.StarredElement) for e in expr.elements], env)
        if t is cst.Dict:
            values, stars = [], []
            for e in expr.elements:
                values.append(e.value)
                stars.append(isinstance(e, cst.StarredDictElement))
            return self._container(values, stars, env)
        if t in (cst.DictComp, cst.ListComp, cst.GeneratorExp, cst.SetComp):
            return self._comprehension(expr, env)
        if t is cst.SimpleString:
            return V(CPUDEV) if string_value(expr) == "cpu" else None
        if t is cst.IfExp:
            a, b = self.value(expr.body, env), self.value(expr.orelse, env)
            return a if a is not None and b is not None and a.kind == b.kind else None
        return None

    def _attribute(self, expr: cst.Attribute, env) -> V | None:
        if self.is_self(expr.value):
            return self.self_attr(expr.attr.value)
        base = self.value(expr.value, env)
        if base is None:
            return None
        attr = expr.attr.value
        if base.kind in (CPUB, DEVB):
            if attr in _TENSOR_META or attr.startswith("_"):
                return None
            return V(CPU if base.kind == CPUB else DEV)
        if base.kind in TENSORS and not base.module and attr in _VIEWS:
            return base
        return None

    def _combine(self, operands, env) -> V | None:
        """Arithmetic: an input wins; unknown operands make the result unknown."""
        kinds, origins = [], ()
        for operand in operands:
            if isinstance(operand, (cst.Integer, cst.Float, cst.Imaginary)) or (
                isinstance(operand, cst.Name) and operand.value in ("None", "True", "False")
            ):
                continue
            v = self.value(operand, env)
            if v is not None and v.kind in TENSORS and not v.module:
                kinds.append(v.kind)
                origins += v.origins
            else:
                kinds.append(None)
        if INP in kinds:
            return V(INP)
        if not kinds or None in kinds:
            return None
        if DEV in kinds:
            return V(DEV)
        return V(CPU, origins)

    def _container(self, values, stars, env) -> V | None:
        kinds = set()
        for value, star in zip(values, stars):
            v = self.value(value, env)
            if v is None:
                return None
            if star:
                kinds.add(CPU if v.kind == CPUB else DEV if v.kind == DEVB else None)
            else:
                kinds.add(v.kind if v.kind in (CPU, DEV) and not v.module and not v.explicit else None)
        if kinds == {CPU}:
            return V(CPUB)
        if kinds == {DEV}:
            return V(DEVB)
        return None

    def _comprehension(self, expr, env) -> V | None:
        scope = dict(env or {})
        node = expr.for_in
        while node is not None:
            self._bind_iteration(node.target, node.iter, scope, env=scope)
            node = node.inner_for_in
        if isinstance(expr, cst.DictComp):
            v = self.value(expr.value, scope)
        else:
            v = self.value(expr.elt, scope)
        if v is None or v.module or v.explicit:
            return None
        return V(CPUB) if v.kind == CPU else V(DEVB) if v.kind == DEV else None

    # ---- calls --------------------------------------------------------------------------
    def _device_arg(self, call: cst.Call) -> tuple[bool, cst.BaseExpression | None]:
        """(has a device argument, that argument)."""
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                return True, arg.value
        return False, None

    def is_cpu_device(self, expr, env=None) -> bool:
        if string_value(expr) == "cpu":
            return True
        if isinstance(expr, cst.Call) and self.ctx.resolve(expr.func) == "torch.device" and expr.args:
            return string_value(expr.args[0].value) == "cpu"
        if isinstance(expr, cst.Name):
            v = env.get(expr.value) if env and expr.value in env else self.lookup(expr.value)
            return v is not None and v.kind == CPUDEV
        return False

    def is_dtype(self, expr) -> bool:
        name = self.ctx.resolve(expr) or ""
        if name.startswith("torch.") and name[6:] in DTYPES:
            return True
        text = dotted(expr) or ""
        return text.endswith("dtype")

    def _placed(self, call: cst.Call, base: V | None, env) -> V | None:
        """The kind after ``.to(...)``, ``.cuda()`` or ``.cpu()`` of a ``base``."""
        method = call.func.attr.value
        module = bool(base and (base.module or base.kind == MODEL))
        batch = bool(base and base.kind in (CPUB, DEVB))
        if method == "cpu":
            to_cpu = True
        elif method == "cuda":
            to_cpu = False
        else:
            target = None
            for arg in call.args:
                if arg.keyword is None and not arg.star:
                    target = arg.value
                    break
                if arg.keyword is not None and arg.keyword.value == "device":
                    target = arg.value
                    break
            if target is None or self.is_dtype(target):
                return base
            if isinstance(target, cst.Name) and not self.is_cpu_device(target, env):
                other = env.get(target.value) if env and target.value in env else self.lookup(target.value)
                if other is not None and other.kind in (CPU, DEV) and not other.module:
                    return V(other.kind)
            to_cpu = self.is_cpu_device(target, env)
        if to_cpu:
            if module:
                return V(MODEL, module=True, loss=bool(base and base.loss))
            return V(CPUB) if batch else V(CPU, explicit=True)
        if module:
            return V(DEV, module=True, loss=bool(base and base.loss))
        return V(DEVB) if batch else V(DEV)

    def _call(self, call: cst.Call, env) -> V | None:
        func = call.func
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "return_tensors" and string_value(arg.value) == "pt":
                if isinstance(func, cst.Attribute) and func.attr.value in ("encode", "apply_chat_template"):
                    return V(CPU)
                return V(CPUB)
        name = self.ctx.resolve(func)
        if name is not None:
            v = self._library_call(name, call, env)
            if v is not False:
                return v
        if isinstance(func, cst.Name):
            fn = func.value
            if fn == "next" and call.args:
                inner = self.value(call.args[0].value, env)
                return self.element(inner)
            if fn == "iter" and call.args:
                inner = self.value(call.args[0].value, env)
                return inner if inner is not None and inner.kind == LOADER else None
            if fn in self.local_modules:
                return V(MODEL, module=True, loss=fn.endswith("Loss"))
            if fn in self.summaries and (env is None or fn not in env) and fn not in self.frame.vars:
                return self.summaries[fn]
            callee = self.value(func, env)
            return self._called(callee)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if method == "from_pretrained":
                text = dotted(receiver) or ""
                if any(k in text for k in ("Tokenizer", "Processor", "Config", "FeatureExtractor", "ImageProcessor")):
                    return None
                return V(MODEL, module=True)
            if self.is_self(receiver):
                cls = self.frame.cls
                if self.frame.forward and cls is not None and method not in cls.methods:
                    return V(INP)  # a submodule's output, on the module's device
                return self._called(self.self_attr(method))
            base = self.value(receiver, env)
            if method in ("to", "cuda", "cpu"):
                if isinstance(receiver, cst.Call) and (dotted(receiver.func) or "").endswith(_SCATTERS):
                    return None  # DataParallel/DDP scatter CPU inputs themselves
                if base is None and method != "to":
                    return V(DEV) if method == "cuda" else V(CPU, explicit=True)
                return self._placed(call, base, env)
            if base is None:
                return None
            if method == "type_as":  # takes the other tensor's dtype *and* device
                other = self.value(call.args[0].value, env) if call.args else None
                return V(other.kind) if other is not None and other.kind in TENSORS and not other.module else None
            if method.startswith("new_"):
                return V(base.kind) if base.kind in TENSORS and not base.module else None
            if base.kind in TENSORS and not base.module:
                if method in _READOUTS or method.startswith("is_"):
                    return None
                return base
            if base.kind in (CPUB, DEVB) and method in ("get", "pop"):
                return V(CPU if base.kind == CPUB else DEV)
            if base.module or base.kind == MODEL:
                if method in _SELF_METHODS:
                    return base
                if method in ("generate", "forward") and base.kind == DEV:
                    return V(DEV)
            return None
        return None

    def _called(self, callee: V | None) -> V | None:
        """The result of calling a value: a moved module gives device tensors."""
        if callee is not None and callee.kind == DEV:
            return V(DEV)
        if callee is not None and callee.kind == INP and callee.module:
            return V(INP)  # a submodule called inside forward
        return None

    def _library_call(self, name: str, call: cst.Call, env):
        """Kind of a call to a resolved library name; ``False`` when not a library call."""
        last = name.rsplit(".", 1)[-1]
        if last == "DataLoader":
            return V(LOADER)
        if not name.startswith("torch."):
            if name.startswith("torchvision.models.") or name in ("timm.create_model",):
                return V(MODEL, module=True)
            return False
        if name == "torch.device":
            return V(CPUDEV) if call.args and string_value(call.args[0].value) == "cpu" else None
        short = name[6:]
        if short in FACTORIES or short in ("tensor", "as_tensor", "from_numpy"):
            has, device = self._device_arg(call)
            if has:
                return V(CPU) if self.is_cpu_device(device, env) else V(DEV)
            first = call.args[0].value if call.args and call.args[0].keyword is None else None
            if short in ("tensor", "as_tensor"):
                if isinstance(first, (cst.List, cst.Tuple, cst.ListComp)):
                    return V(CPU, (call,))
                return None
            if short == "from_numpy":
                return V(CPU)
            if isinstance(first, (cst.Tuple, cst.List)) and not first.elements:
                return None  # 0-dim
            return V(CPU, (call,))
        if last.endswith("_like") and call.args:
            base = self.value(call.args[0].value, env)
            has, device = self._device_arg(call)
            if has:
                return V(CPU) if self.is_cpu_device(device, env) else V(DEV)
            return V(base.kind) if base is not None and base.kind in TENSORS and not base.module else None
        if (name.count(".") == 2 or name.startswith("torch.nn.modules.")) and name.startswith("torch.nn.") and last[:1].isupper():
            if last in ("Parameter", "Buffer", "DataParallel", "DistributedDataParallel", "ModuleList", "ModuleDict"):
                return None
            if name.startswith("torch.nn.functional."):
                return None
            return V(MODEL, module=True, loss=last.endswith("Loss"))
        if name.startswith(("torch.optim", "torch.utils", "torch.cuda", "torch.distributed", "torch.backends")):
            return None
        if last[:1].islower():
            args = []
            for arg in call.args:
                if arg.keyword is not None or arg.star:
                    continue
                value = arg.value
                if isinstance(value, (cst.List, cst.Tuple)):
                    args.extend(e.value for e in value.elements)
                else:
                    args.append(value)
            if not args:
                return None
            return self._combine(args, env)
        return None

    # ---- bindings -----------------------------------------------------------------------
    def element(self, v: V | None) -> V | None:
        """What iterating (or unpacking) ``v`` yields."""
        if v is None:
            return None
        if v.kind == LOADER:
            return V(CPUB)
        if v.kind == CPUB:
            return V(CPU)
        if v.kind == DEVB:
            return V(DEV)
        if v.kind in TENSORS and not v.module:
            return V(v.kind)
        return None

    def _set(self, name: str, v: V | None, scope: dict | None) -> None:
        if scope is not None:
            scope[name] = v
            return
        self.frame.vars[name] = v
        if v is not None and v.kind == DEV and (v.module or _MODULE_NAME.search(name)):
            self.frame.moved = True

    def bind(self, target: cst.BaseExpression, value_expr: cst.BaseExpression | None, v: V | None, scope: dict | None = None) -> None:
        """Bind an assignment target to ``v`` (the kind of ``value_expr``)."""
        if isinstance(target, cst.Name):
            self._set(target.value, v, scope)
        elif isinstance(target, cst.Attribute):
            if scope is None and self.is_self(target.value) and self.frame.cls is not None:
                self.frame.cls.attrs[target.attr.value] = v
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            if isinstance(value_expr, (cst.Tuple, cst.List)) and len(value_expr.elements) == len(elements) and not any(
                isinstance(e, cst.StarredElement) for e in (*elements, *value_expr.elements)
            ):
                for t, e in zip(elements, value_expr.elements):
                    self.bind(t.value, e.value, self.value(e.value, scope), scope)
                return
            inner = self.element(v)
            for t in elements:
                if isinstance(t, cst.StarredElement):
                    self.bind(t.value, None, None, scope)
                elif isinstance(t.value, (cst.Tuple, cst.List)):
                    self.bind(t.value, None, v if v is not None and v.kind in (CPUB, DEVB) else inner, scope)
                else:
                    self.bind(t.value, None, inner, scope)
        elif isinstance(target, cst.Subscript) and scope is None:
            base = target.value
            if isinstance(base, cst.Name) and base.value in self.frame.vars:
                self.frame.vars[base.value] = None  # batch["x"] = ...: mixed from now on
        self._memo.clear()

    def _bind_iteration(self, target, iter_expr, scope: dict | None, env=None) -> None:
        """``for target in iter_expr``: loaders yield CPU batches; enumerate/zip/tqdm pass through."""
        if isinstance(iter_expr, cst.Call):
            func = iter_expr.func
            fname = dotted(func) or ""
            last = fname.rsplit(".", 1)[-1]
            args = [a.value for a in iter_expr.args if a.keyword is None and not a.star]
            if last == "enumerate" and args and isinstance(target, cst.Tuple) and len(target.elements) == 2:
                self.bind(target.elements[0].value, None, None, scope)
                self._bind_iteration(target.elements[1].value, args[0], scope, env)
                return
            if last == "zip" and isinstance(target, cst.Tuple) and len(target.elements) == len(args):
                for t, a in zip(target.elements, args):
                    self._bind_iteration(t.value, a, scope, env)
                return
            if last in _PASSTHROUGH_ITER and args:
                self._bind_iteration(target, args[0], scope, env)
                return
            if last in ("items", "values") and isinstance(func, cst.Attribute):
                base = self.value(func.value, env)
                inner = None
                if base is not None and base.kind in (CPUB, DEVB):
                    inner = V(CPU if base.kind == CPUB else DEV)
                if last == "items" and isinstance(target, cst.Tuple) and len(target.elements) == 2:
                    self.bind(target.elements[0].value, None, None, scope)
                    self.bind(target.elements[1].value, None, inner, scope)
                else:
                    self.bind(target, None, inner if last == "values" else None, scope)
                return
        if self.frame.forward and isinstance(iter_expr, cst.Attribute) and self.is_self(iter_expr.value):
            cls = self.frame.cls
            if cls is not None and iter_expr.attr.value not in cls.param_attrs:
                # for block in self.blocks: a submodule, whose output is on the module's device
                self.bind(target, None, V(INP, module=True), scope)
                return
        v = self.value(iter_expr, env)
        self.bind(target, None, self.element(v) if v is None or v.kind != CPUB else V(CPU), scope)

    # ---- hooks --------------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        is_module = any(is_module_base(b.value, self.ctx, self.local_modules) for b in node.bases)
        silent = any((dotted(b.value) or "").endswith("LightningModule") for b in node.bases)
        if is_module:
            self.local_modules.add(node.name.value)
        self.classes.append(ClassInfo(node, is_module, silent))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        scope = self.ctx.scope
        cls = self.classes[-1] if self.classes and scope.parent is not None and scope.parent.kind == "class" else None
        params = node.params
        positional = [*params.posonly_params, *params.params]
        static = any(dotted(d.decorator) in ("staticmethod", "classmethod") for d in node.decorators)
        self_name = positional[0].name.value if cls is not None and positional and not static else None
        frame = Frame("function", node, self.frame, cls, self_name)
        for param in (*positional, *params.kwonly_params):
            name = param.name.value
            frame.vars[name] = None
            if frame.forward and name != self_name and _may_be_tensor(param):
                frame.vars[name] = V(INP)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                frame.vars[star.name.value] = None
        self.frame = frame
        self._memo.clear()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.frame
        self.frame = frame.parent
        self._memo.clear()
        if frame.parent is not None and frame.parent.kind == "module" and frame.cls is None:
            returns = frame.returns
            kinds = {r.kind if r is not None and not r.module and not r.explicit else None for r in returns}
            name = node.name.value
            if returns and kinds <= {CPU, CPUB} and None not in kinds:
                self.summaries[name] = V(CPUB) if CPUB in kinds else V(CPU)
            else:
                self.summaries.pop(name, None)
        self.frame.vars.pop(node.name.value, None)

    def visit_Return(self, node: cst.Return) -> None:
        self.frame.returns.append(self.value(node.value) if node.value is not None else None)

    def leave_Assign(self, node: cst.Assign) -> None:
        v = self.value(node.value)
        for target in node.targets:
            self.bind(target.target, node.value, v)
        self._note_params(node)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.bind(node.target, node.value, self.value(node.value))

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            v = self._combine((node.target, node.value), None)
            self.bind(node.target, None, v)

    def visit_For(self, node: cst.For) -> None:
        self._bind_iteration(node.target, node.iter, None)
        self._memo.clear()

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
            method, receiver = call.func.attr.value, call.func.value
            if method in ("to", "cuda", "cpu") and isinstance(receiver, (cst.Name, cst.Attribute)):
                base = self.value(receiver)
                if base is None or base.kind in (MODEL, DEV, CPU) and (base.module or base.kind == MODEL):
                    base = base or V(MODEL, module=True)
                    placed = self._placed(call, base, None)
                    if placed is not None and placed is not base:
                        self.bind(receiver, None, placed)
            elif method == "register_buffer" and self.is_self(receiver) and call.args and self.frame.cls is not None:
                name = string_value(call.args[0].value)
                if name:
                    self.frame.cls.param_attrs.add(name)
                    self.frame.cls.attrs[name] = None

    def _note_params(self, node: cst.Assign) -> None:
        cls = self.frame.cls
        if cls is None or not cls.is_module:
            return
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and self.is_self(t.value) and isinstance(node.value, cst.Call):
                name = self.ctx.resolve(node.value.func) or ""
                if name.endswith(("Parameter", "Buffer")):
                    cls.param_attrs.add(t.attr.value)
                elif name.startswith("torch.nn.") and name.rsplit(".", 1)[-1][:1].isupper():
                    cls.torch_modules.add(t.attr.value)

    # branches: the two arms of an ``if`` are joined
    def visit_If(self, node: cst.If) -> None:
        self._branches.append([node, dict(self.frame.vars), None, self.frame])

    def _end_arm(self, block) -> None:
        if self._branches:
            record = self._branches[-1]
            if record[0].body is block and record[3] is self.frame:
                record[2] = self.frame.vars
                self.frame.vars = dict(record[1])
                self._memo.clear()

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._end_arm(node)

    def leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._end_arm(node)

    def leave_If(self, node: cst.If) -> None:
        if not self._branches or self._branches[-1][0] is not node:
            return
        _, _, after_body, frame = self._branches.pop()
        if after_body is None or frame is not self.frame:
            return
        current = frame.vars
        joined = {}
        for name in set(after_body) | set(current):
            a, b = after_body.get(name), current.get(name)
            same = a is not None and b is not None and a.kind == b.kind and a.module == b.module
            joined[name] = a if same else None
        frame.vars = joined
        self._memo.clear()


def _may_be_tensor(param: cst.Param) -> bool:
    """A ``forward`` parameter that may hold a tensor (no scalar default, no scalar annotation)."""
    default = param.default
    if default is not None and not (isinstance(default, cst.Name) and default.value == "None"):
        return False
    if param.annotation is not None:
        text = cst.Module([]).code_for_node(param.annotation.annotation)
        if text in _SCALAR_ANNOTATIONS or text.startswith(("int", "float", "bool", "str", "Optional[int", "Optional[bool")):
            return False
    return True
