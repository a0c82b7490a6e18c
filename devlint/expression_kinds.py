"""The kind of an expression in the device dataflow: a tensor on the CPU, on the device, a batch...

Mixed into :class:`devlint.dataflow.DeviceFlow`, whose frames hold the names' kinds
(:mod:`devlint.flow_kinds`; the kinds are listed in :mod:`devlint.dataflow`'s docstring).
:meth:`ExpressionKinds.value` reads one expression: names and ``self.`` attributes, operators
and containers, ``.to()``/``.cuda()``/``.cpu()`` moves, torch factories and joins, calls of a
model, of a same-module function or of a project function, and the items of a batch.
Anything it cannot tell is ``None`` (unknown), which never leads to a finding.
"""

from __future__ import annotations

import libcst as cst

from .batches import BATCH_CALL
from .flow_kinds import CPU, CPUB, CPUDEV, DEV, DEVB, ENUM, FED, INP, LOADER, LOADERS, MODEL, PARAM, PB, PITEM, TENSORS, ZIP, V
from .flow_tables import (
    _CONFIG_NAME, _DEVICE_NAME, _JOINS, _KEEPING_WRAPPERS, _MODEL_CALLEE, _MODEL_METHODS, _READOUTS, _SCATTERS, _SELF_METHODS, _TENSOR_META,
    _TENSOR_OPS, _VIEWS, DTYPES, FACTORIES, LEGACY_CONSTRUCTORS,
)
from .guards import string_value
from .names import dotted


def _aligned(call: cst.Call, self_name: str | None, params: set[str] | frozenset = frozenset()) -> bool:
    """``x.to(y.device)``: a move onto the device of another value (not ``self.device``, not
    ``model.device``, which name where the model is); also ``x.to(y)`` with ``y`` one of
    ``params`` (another parameter of the step function, not named like a device): ``x`` takes
    ``y``'s device and dtype, so ``y`` is where the author wants the data, not left behind."""
    first = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
    if first.__class__ is cst.Name and first.value in params:
        return not _DEVICE_NAME.search(first.value) and not _MODEL_CALLEE.search(first.value)
    if first.__class__ is not cst.Attribute or first.attr.value != "device" or first.value.__class__ is not cst.Name:
        return False
    name = first.value.value
    return name != self_name and not _MODEL_CALLEE.search(name) and not _CONFIG_NAME.match(name)


def _is_none(expr: cst.BaseExpression) -> bool:
    """The literal ``None``."""
    return expr.__class__ is cst.Name and expr.value == "None"


def _empty_size(call: cst.Call) -> bool:
    """``torch.empty([0])``, ``torch.zeros(0)``: a factory whose only size is 0."""
    sizes = [a.value for a in call.args if a.keyword is None or a.keyword.value == "size"]
    if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)) and len(sizes[0].elements) == 1:
        sizes = [sizes[0].elements[0].value]
    return len(sizes) == 1 and sizes[0].__class__ is cst.Integer and sizes[0].value == "0"


#: module constants that are Python numbers (a scalar operand, as a literal is)
_NUMBER_CONSTANTS = frozenset(f"{m}.{c}" for m in ("math", "numpy", "torch") for c in ("pi", "e", "inf", "tau") if (m, c) != ("numpy", "tau"))


def _scalar_index(expr: cst.Subscript, base: V) -> bool:
    """``t[0]`` of a 1-D factory result (``torch.randint(lo, hi, (1,))``): a 0-dim tensor."""
    if len(expr.slice) != 1 or expr.slice[0].slice.__class__ is not cst.Index:
        return False
    index = expr.slice[0].slice.value
    if index.__class__ is cst.UnaryOperation:
        index = index.expression
    if index.__class__ is not cst.Integer:
        return False
    for origin in base.origins:
        if not (any(isinstance(a.value, (cst.Tuple, cst.List)) and len(a.value.elements) == 1 for a in origin.args)
                or _one_dimensional(origin)):
            return False
    return True


def _item_field(attr: str) -> bool:
    """Can the field ``attr`` of a step's parameter be a tensor of its batch (``data.x``,
    ``batch.snr``)? Not tensor metadata (``.shape``), a private field or a submodule
    (``.encoder``)."""
    return attr not in _TENSOR_META and not attr.startswith("_") and not _MODEL_CALLEE.search(attr)


#: torch functions that return a dtype (an argument of ``.to()`` that casts, never moves)
_DTYPE_CALLS = frozenset({"torch.promote_types", "torch.result_type", "torch.get_default_dtype"})

#: factories whose result is always 1-D, and those sized by their positional arguments
_ONE_D = frozenset({"arange", "range", "linspace", "logspace", "randperm"})


_SIZED = frozenset({"zeros", "ones", "empty", "rand", "randn"})


def _one_dimensional(call: cst.Call) -> bool:
    """``torch.rand(2)``, ``torch.arange(n)``: a 1-D factory result (so ``t[0]`` is 0-dim)."""
    last = dotted(call.func)
    last = last.rsplit(".", 1)[-1] if last else ""
    if last in _ONE_D:
        return True
    sizes = [a.value for a in call.args if a.keyword is None and not a.star]
    return last in _SIZED and len(sizes) == 1 and sizes[0].__class__ is cst.Integer


class ExpressionKinds:
    """The kind of an expression (see the module docstring)."""

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
            if env is None and (base is None or base.kind == PARAM) and self.param_group(expr.value) is not None:
                return V(PITEM, group=self.param_group(expr.value))  # tgt[:, 1:] of a parameter tgt
            if base is None:
                return None
            if base.kind == FED:
                return base
            if base.kind == CPUB:
                return V(CPU, group=base.group)
            if base.kind == DEVB:
                return V(DEV)
            if base.kind == CPU and base.origins and _scalar_index(expr, base):
                return V(CPU)  # torch.randint(0, n, (1,))[0]: 0-dim, which CUDA accepts
            if base.kind == PB:
                return V(PITEM, group=base.group, param=base.param)
            if (base.kind in TENSORS or base.kind == PITEM) and not base.module:
                return base
            return None
        if t is cst.Call:
            v = self._call(expr, env)
            return self.fed(expr) if v is None and env is None else v
        if t is cst.BinaryOperation:
            return self._combine((expr.left, expr.right), env)
        if t is cst.Comparison:
            return self._combine((expr.left, *(c.comparator for c in expr.comparisons)), env)
        if t is cst.UnaryOperation:
            v = self.value(expr.expression, env)
            return v if v is not None and v.kind in TENSORS else None
        if t in (cst.Tuple, cst.List):
            return self._container([e.value for e in expr.elements], [e.__class__ is cst.StarredElement for e in expr.elements], env)
        if t is cst.Dict:
            values, stars = [], []
            for e in expr.elements:
                values.append(e.value)
                stars.append(e.__class__ is cst.StarredDictElement)
            return self._container(values, stars, env)
        if t in (cst.DictComp, cst.ListComp, cst.GeneratorExp, cst.SetComp):
            return self._comprehension(expr, env)
        if t is cst.SimpleString:
            return V(CPUDEV) if string_value(expr) == "cpu" else None
        if t is cst.IfExp:
            if _is_none(expr.orelse):  # labels if cfg.use_labels else None: labels wherever it is a value
                return self.value(expr.body, env)
            if _is_none(expr.body):
                return self.value(expr.orelse, env)
            a, b = self.value(expr.body, env), self.value(expr.orelse, env)
            return a if a is not None and b is not None and a.kind == b.kind else None
        return None

    def _attribute(self, expr: cst.Attribute, env) -> V | None:
        if self.is_self(expr.value):
            return self.self_attr(expr.attr.value)
        base = self.value(expr.value, env)
        if env is None and (base is None or base.kind in (PARAM, PITEM)) and _item_field(expr.attr.value):
            if self.param_group(expr.value) is not None:
                # data.x is an item of data's own fields: evidence only when data.edge_index
                # moves, not when another parameter or a method's result does (data_buffer.sample())
                return V(PITEM, group=hash((self.param_group(expr.value), expr.value.value)))
        if base is None:
            return None
        attr = expr.attr.value
        if base.kind == FED:
            return base if attr not in _TENSOR_META and not attr.startswith("_") else None
        if base.kind in (CPUB, DEVB, PB):
            if attr in _TENSOR_META or attr.startswith("_") or _MODEL_CALLEE.search(attr):
                return None  # exp.expert_model: a module, not an item
            if base.kind == PB:
                return V(PITEM, group=base.group, param=base.param)
            return V(CPU, group=base.group) if base.kind == CPUB else V(DEV)
        if (base.kind in TENSORS or base.kind == PITEM) and not base.module and attr in _VIEWS:
            return base
        if base.kind == DEV and not base.module and attr not in _TENSOR_META and not attr.startswith("_"):
            return V(DEV)  # outputs.logits, outputs.last_hidden_state of a model on the device
        return None

    def _placing_dataset(self, expr: cst.BaseExpression | None) -> bool:
        """A Dataset of this module whose ``__getitem__`` returns device tensors: ``Ds(...)`` or a
        name bound to one."""
        if expr.__class__ is cst.Call:
            return dotted(expr.func) in self.device_datasets
        return dotted(expr) in self.device_dataset_names if expr is not None else False

    def _scalar_attr(self, expr: cst.BaseExpression) -> bool:
        """``self.p`` where the class assigns ``p`` a number (see :attr:`ClassInfo.scalar_attrs`)."""
        cls = self.frame.cls
        return (
            cls is not None and expr.__class__ is cst.Attribute and self.is_self(expr.value)
            and expr.attr.value in cls.scalar_attrs
        )

    def _scalar_name(self, expr: cst.BaseExpression) -> bool:
        """``math.pi``/``np.pi``/``torch.pi`` (a number constant), or a parameter of the current
        function annotated ``int``/``float`` and not rebound (``def f(x, sigma: float, m: int)``):
        a scalar operand, as a literal is."""
        if expr.__class__ is cst.Attribute:
            return (self.ctx.resolve(expr) or "") in _NUMBER_CONSTANTS
        if expr.__class__ is not cst.Name:
            return False
        fn, name = self.frame.node, expr.value
        if fn.__class__ is not cst.FunctionDef or name in self.frame.rebound:
            return False
        for param in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params):
            if param.name.value == name:
                return param.annotation is not None and param.annotation.annotation.__class__ is cst.Name and (
                    param.annotation.annotation.value in ("int", "float"))
        return False

    def _number_expression(self, expr: cst.BaseExpression) -> bool:
        """``2 * math.pi``, ``-scale / 2`` with ``scale: float``: arithmetic of number literals and
        :meth:`_scalar_name` operands only (a Python number)."""
        t = expr.__class__
        if t is cst.UnaryOperation:
            return self._number_expression(expr.expression)
        if t is cst.BinaryOperation:
            return self._number_expression(expr.left) and self._number_expression(expr.right)
        return t in (cst.Integer, cst.Float) or self._scalar_name(expr)

    def _combine(self, operands, env) -> V | None:
        """Arithmetic: an input wins; unknown operands make the result unknown; an item of a
        batch left on the CPU (alone or with CPU tensors) stays that item."""
        kinds, origins, groups = [], (), set()
        for operand in operands:
            if isinstance(operand, (cst.Integer, cst.Float, cst.Imaginary)) or (
                operand.__class__ is cst.Name and operand.value in ("None", "True", "False")
            ) or self._scalar_attr(operand) or self._scalar_name(operand) or self._number_expression(operand):
                continue
            v = self.value(operand, env)
            if env is None and (v is None or v.kind == PARAM) and self.param_group(operand) in self.frame.moved_groups:
                v = V(PITEM, group=self.param_group(operand))  # x * 2 of a parameter x whose siblings move
            if v is not None and (v.kind in TENSORS or v.kind == PITEM) and not v.module:
                kinds.append(v.kind)
                origins += v.origins
                groups.add(v.group)
            else:
                kinds.append(None)
        if INP in kinds:
            return V(INP)
        if not kinds or None in kinds:
            return None
        group = groups.pop() if len(groups) == 1 else None
        if DEV in kinds:  # (gripper == OPEN of a moved item: still that item, no model's output)
            return None if PITEM in kinds else V(DEV, group=group if kinds == [DEV] else None)
        if PITEM in kinds:  # torch.transpose(x, 1, 2), units + 1: still the item, unmoved
            return V(PITEM, group=group) if group is not None else None
        return V(CPU, origins, group=group)

    def _container(self, values, stars, env) -> V | None:
        mixed = self.mixed_container(values, stars, env)
        if mixed is not None:
            return mixed
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
        if expr.__class__ is cst.DictComp:
            v = self.value(expr.value, scope)
        else:
            v = self.value(expr.elt, scope)
        if v is None or v.module or v.explicit:
            return None
        return V(CPUB) if v.kind == CPU else V(DEVB, group=v.group) if v.kind == DEV else None

    def _device_arg(self, call: cst.Call) -> tuple[bool, cst.BaseExpression | None]:
        """(has a device argument, that argument)."""
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                return True, arg.value
        return False, None

    def is_cpu_device(self, expr, env=None) -> bool:
        if string_value(expr) == "cpu":
            return True
        if expr.__class__ is cst.Call and self.ctx.resolve(expr.func) == "torch.device" and expr.args:
            return string_value(expr.args[0].value) == "cpu"
        if expr.__class__ is cst.Name:
            v = env.get(expr.value) if env and expr.value in env else self.lookup(expr.value)
            return v is not None and v.kind == CPUDEV
        return False

    def is_dtype(self, expr) -> bool:
        if expr.__class__ is cst.Call:  # x.to(torch.promote_types(x.dtype, y.dtype)): a cast
            return (self.ctx.resolve(expr.func) or "") in _DTYPE_CALLS
        name = self.ctx.resolve(expr) or ""
        if name.startswith("torch.") and name[6:] in DTYPES:
            return True
        text = (dotted(expr) or "").rsplit(".", 1)[-1].lower()
        return text.endswith("dtype") or "dtype" in text.split("_")  # work_dtype, dtype_original

    def _placed(self, call: cst.Call, base: V | None, env) -> V | None:
        """The kind after ``.to(...)``, ``.cuda()`` or ``.cpu()`` of a ``base``."""
        method = call.func.attr.value
        module = bool(base and (base.module or base.kind == MODEL))
        batch = bool(base and base.kind in (CPUB, DEVB, PB))
        group = base.group if base is not None and base.kind in (PB, PITEM, CPU, CPUB) else None
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
            if target.__class__ is cst.Name and not self.is_cpu_device(target, env):
                other = env.get(target.value) if env and target.value in env else self.lookup(target.value)
                if other is not None and other.kind in (CPU, DEV) and not other.module:
                    return V(other.kind)
            to_cpu = self.is_cpu_device(target, env)
        if to_cpu:
            if module:
                return V(MODEL, module=True, loss=bool(base and base.loss))
            return V(CPUB, explicit=True) if batch else V(CPU, explicit=True)  # DEV103 reports a .cpu()
        if module:
            return V(DEV, module=True, loss=bool(base and base.loss))
        if group is not None and (_aligned(call, self.frame.self_name, self.frame.params) or (
                env is None and (self._onto_other_device(call) or self._copy_moved(call)))):
            group = None  # x.to(y.device), x.to(device) after device = y.device, adv = x.clone().to(d): no evidence
        elif group is not None and env is None:
            self.frame.moved_groups.add(group)  # model(x.to(d)): the batch is partly moved
        return V(DEVB, group=group) if batch else V(DEV, group=group)

    def _call(self, call: cst.Call, env) -> V | None:
        func = call.func
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "return_tensors" and string_value(arg.value) == "pt":
                if func.__class__ is cst.Attribute and func.attr.value in ("encode", "apply_chat_template"):
                    return V(CPU)
                return V(CPUB)
        last = (dotted(func) or "").rsplit(".", 1)[-1]
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if last in ("tqdm", "iter") and positional:
            inner = self.value(positional[0], env)  # pbar = tqdm(loader): still the loader
            if inner is not None and inner.kind in (LOADER, PARAM, ENUM, ZIP):
                return inner
        if last == "Variable" and positional and env is None:
            return self.value(positional[0])  # torch.autograd.Variable(x): x itself
        if last == "enumerate" and positional:
            return V(ENUM, origins=(self.value(positional[0], env),))
        if last == "zip" and positional and not any(a.star for a in call.args):
            return V(ZIP, origins=tuple(self.value(a, env) for a in positional))
        if self.ctx.project is not None:
            v = self._project_call(call, env)
            if v is not None:
                return v
        name = self.ctx.resolve(func)
        if name is not None:
            v = self._library_call(name, call, env)
            if v is not False:
                return v
        if func.__class__ is cst.Name:
            fn = func.value
            if fn == "next" and call.args:
                source = call.args[0].value
                inner = self.value(source, env)
                if source.__class__ is cst.Call and dotted(source.func) == "iter" and source.args:
                    source = source.args[0].value
                if env is None and (inner is None or inner.kind == PARAM) and isinstance(source, (cst.Name, cst.Attribute)):
                    # batch = next(iter(loader)) of a loader the linter cannot see: one batch group
                    return V(PB, group=id(call), param=inner.param if inner is not None else None)
                if inner is not None and inner.kind == LOADER and env is None:
                    return V(CPUB, group=id(call))  # next(iter(DataLoader(...))): one batch, as a loop's
                return self.element(inner)
            if fn == "iter" and call.args:
                inner = self.value(call.args[0].value, env)
                return inner if inner is not None and inner.kind == LOADER else None
            if fn in self.local_modules:
                return V(MODEL, module=True, loss=fn.endswith("Loss"))
            if fn in self.summaries and (env is None or fn not in env) and fn not in self.frame.vars:
                return self.summaries[fn]
            callee = self.value(func, env)
            return self._called(callee, call, func, env)
        if func.__class__ is cst.Subscript and self.frame.forward and func.value.__class__ is cst.Attribute and self.is_self(func.value.value):
            cls = self.frame.cls
            if cls is not None and func.value.attr.value not in cls.param_attrs:
                return V(INP)  # self.layers[0](x): a submodule of an nn.ModuleList, on the module's device
        if func.__class__ is cst.Attribute:
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
                return self._called(self.self_attr(method), call, func, env)
            base = self.value(receiver, env)
            if method in ("to", "cuda", "cpu"):
                if receiver.__class__ is cst.Call and (dotted(receiver.func) or "").endswith(_SCATTERS):
                    return None  # DataParallel/DDP scatter CPU inputs themselves
                if (base is None or base.kind in (PARAM, PITEM)) and self.model_named(receiver):
                    base = V(MODEL, module=True)  # model = model.to(device): still a model
                frame = self.frame
                if env is None and receiver.__class__ is cst.Name and receiver.value in frame.params and (
                        base is None or base.kind in (PARAM, PITEM)):
                    # a parameter of a step function moved: the others came in as items of its batch
                    if _aligned(call, frame.self_name, frame.params) or self._onto_other_device(call):
                        return V(DEV)  # x.to(y.device): says where y is, not that y stayed behind
                    placed = self._placed(call, V(PITEM, group=id(frame.node)), env)
                    if placed is not None and placed.kind == DEV:
                        frame.moved_groups.add(id(frame.node))
                    return placed
                if base is None and method != "to":
                    return V(DEV) if method == "cuda" else V(CPU, explicit=True)
                return self._placed(call, base, env)
            if method in _MODEL_METHODS and (base is None or base.kind in (PARAM, PITEM)):
                return self._called(base, call, receiver, env)
            if env is None and (base is None or base.kind == PARAM) and BATCH_CALL.match(method):
                # x, y = loader.next_batch(): one batch of a loader the linter cannot see
                return V(PB, group=id(call), param=None)
            if env is None and (base is None or base.kind == PARAM) and method not in _READOUTS and self.param_group(receiver) is not None:
                return V(PITEM, group=self.param_group(receiver))  # x = x.float() of a parameter x
            if env is None and base is not None and base.kind == PB and method in _TENSOR_OPS:
                # window = batch_x.permute(1, 0, 2): the batch is one tensor, this an item of it
                return V(PITEM, group=base.group, param=base.param)
            if base is not None and base.kind == CPUB and method in _TENSOR_OPS:
                # x.float() of a DataLoader over one tensor: the batch is that tensor, on the CPU
                return V(CPU, group=base.group)
            if base is None:
                return None
            if base.kind == FED:
                return None if method in _READOUTS or method.startswith("is_") else base
            if method == "type_as":  # takes the other tensor's dtype *and* device
                other = self.value(call.args[0].value, env) if call.args else None
                return V(other.kind) if other is not None and other.kind in TENSORS and not other.module else None
            if method.startswith("new_"):
                return V(base.kind) if base.kind in TENSORS and not base.module else None
            if (base.kind in TENSORS or base.kind == PITEM) and not base.module:
                if method in _READOUTS or method.startswith("is_"):
                    return None
                return base
            if base.kind in (CPUB, DEVB) and method in ("get", "pop"):
                return V(CPU, group=base.group) if base.kind == CPUB else V(DEV)
            if base.kind == PB and method in ("get", "pop"):
                return V(PITEM, group=base.group, param=base.param)
            if base.module or base.kind == MODEL:
                if method in _SELF_METHODS:
                    return base
                if method in _MODEL_METHODS and base.kind == DEV:
                    return V(DEV)
            return None
        return None

    def _project_call(self, call: cst.Call, env) -> V | None:
        """A call of a function or class that another file of the project defines, as its
        summary says (:mod:`devlint.project`); ``None`` when it says nothing."""
        head = call.func
        while head.__class__ is cst.Attribute:
            head = head.value
        if head.__class__ is not cst.Name or head.value in self.frame.vars or (env and head.value in env):
            return None
        kind = self.ctx.project.call_kind(call.func, self.ctx.names)
        if kind is None:
            return None
        if kind == "moves":  # its first argument, moved to a device
            first = next((a.value for a in call.args if a.keyword is None and not a.star), None)
            base = self.value(first, env) if first is not None else None
            if base is not None and (base.module or base.kind == MODEL):
                return V(DEV, module=True, loss=base.loss)
            # a helper that moves a batch or a loop's item moves its group; one given a step
            # function's parameter may return a tensor made from it (get_mask(x) ->
            # mask.to(x.device)), which says nothing of the other parameters
            group = base.group if base is not None and base.kind in (PB, PITEM) else None
            group = None if group == id(self.frame.node) else group
            return V(DEVB, group=group) if base is not None and base.kind in (CPUB, DEVB, PB) else V(DEV, group=group)
        if kind == "module":
            return V(MODEL, module=True, loss=(dotted(call.func) or "").endswith("Loss"))
        return V({"loader": LOADER, "loaders": LOADERS, "cpu": CPU, "cpub": CPUB}[kind])

    def _called(self, callee: V | None, call: cst.Call | None = None, named=None, env=None) -> V | None:
        """The result of calling a value: a moved module gives device tensors; so does a model
        the linter cannot see (a parameter, ``self.model``) when it is given device tensors
        (also a batch of them, ``self.model(inputs)`` with ``inputs = [b[c].to(d) for c in cols]``)."""
        if callee is not None and callee.kind == DEV:
            return V(DEV)
        if callee is not None and callee.kind == INP and callee.module:
            return V(INP)  # a submodule called inside forward
        if call is not None and (callee is None or callee.kind == PARAM) and self.model_named(named):
            for arg in call.args:
                v = self.value(arg.value, env)
                if v is not None and not v.module and v.kind in (DEV, DEVB):
                    return V(DEV)
        return None

    def _library_call(self, name: str, call: cst.Call, env):
        """Kind of a call to a resolved library name; ``False`` when not a library call."""
        last = name.rsplit(".", 1)[-1]
        if last == "DataLoader":
            dataset = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "dataset"), None)
            held = self.value(dataset, env) if dataset is not None else None
            if held is not None and held.kind == DEVB:
                return None  # a dataset of device tensors yields device batches
            if self._placing_dataset(dataset) or any(
                a.keyword is not None and a.keyword.value == "collate_fn" and (
                    dotted(a.value) in self.device_collates or self._moving_collate(a.value))
                for a in call.args
            ):
                return None  # its collate_fn or its Dataset's __getitem__ moves the batch
            return V(LOADER)
        if last == "TensorDataset":
            values = [a.value for a in call.args if a.keyword is None and not a.star]
            return self._container(values, [False] * len(values), env) if values else None
        if not name.startswith("torch."):
            if name.startswith("torchvision.models.") or name in ("timm.create_model",):
                return V(MODEL, module=True)
            return False
        if name == "torch.device":
            return V(CPUDEV) if call.args and string_value(call.args[0].value) == "cpu" else None
        if last in _KEEPING_WRAPPERS and (last != "compile" or name == "torch.compile"):
            # torch.compile(model), DDP(model, device_ids=[rank]), FSDP(model): what they wrap
            first = call.args[0].value if call.args and call.args[0].keyword is None else None
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value in ("model", "module"):
                    first = arg.value
            inner = self.value(first, env) if first is not None else None
            if inner is not None and (inner.module or inner.kind in (PARAM, DEV)):
                return inner
            return None
        short = name[6:]
        if last[:1].islower() and any(part[:1].isupper() for part in short.split(".")[:-1]):
            # a class's method: nn.Embedding.from_pretrained(w) builds a module, not a tensor
            return V(MODEL, module=True) if last == "from_pretrained" else None
        if short == "onnx.operators.shape_as_tensor":
            return V(CPU)  # a shape, on the CPU by design (ONNX tracing)
        if short in ("normal", "bernoulli", "multinomial", "poisson") and call.args and call.args[0].keyword is None:
            first = call.args[0].value
            if not isinstance(first, (cst.Integer, cst.Float, cst.UnaryOperation)):
                base = self.value(first, env)  # torch.normal(mean_tensor, std): on mean's device
                return V(base.kind) if base is not None and base.kind in TENSORS and not base.module else None
        if short in LEGACY_CONSTRUCTORS and call.args and not any(a.keyword is not None or a.star for a in call.args):
            return V(CPU, (call,))  # torch.Tensor([...]), torch.FloatTensor(3, 4): always on the CPU
        if short in _JOINS and call.args and call.args[0].keyword is None:
            joined = self.value(call.args[0].value, env)  # torch.stack([torch.from_numpy(a) ...])
            if joined is not None and joined.kind in (CPUB, DEVB):
                return V(CPU) if joined.kind == CPUB else V(DEV)
        if short in FACTORIES or short in ("tensor", "as_tensor", "from_numpy"):
            has, device = self._device_arg(call)
            if has:
                return V(CPU) if self.is_cpu_device(device, env) else V(DEV, (call,))  # (origins: built here)
            if self.default_device and short != "from_numpy":
                return None  # on the default device the file sets, whatever it is
            first = call.args[0].value if call.args and call.args[0].keyword is None else None
            if short in ("tensor", "as_tensor"):
                if isinstance(first, (cst.List, cst.Tuple, cst.ListComp)):
                    return V(CPU, (call,))
                return None
            if short == "from_numpy":
                return V(CPU)
            if isinstance(first, (cst.Tuple, cst.List)) and not first.elements:
                return None  # 0-dim
            if _empty_size(call):
                return V(CPU)  # torch.empty([0]): a placeholder that holds nothing
            return V(CPU, (call,))
        if last.endswith("_like") and call.args:
            base = self.value(call.args[0].value, env)
            has, device = self._device_arg(call)
            if has:
                return V(CPU) if self.is_cpu_device(device, env) else V(DEV, (call,))  # (origins: built here)
            return V(base.kind) if base is not None and base.kind in TENSORS and not base.module else None
        if (name.count(".") == 2 or name.startswith("torch.nn.modules.")) and name.startswith("torch.nn.") and last[:1].isupper():
            if last in ("Parameter", "Buffer", "DataParallel", "DistributedDataParallel", "ModuleList", "ModuleDict"):
                return None
            if name.startswith("torch.nn.functional."):
                return None
            return V(MODEL, module=True, loss=last.endswith("Loss"))
        if name.startswith(("torch.optim", "torch.utils", "torch.cuda", "torch.distributed", "torch.backends")):
            return None
        if name.count(".") == 1 and last in _TENSOR_OPS and call.args and call.args[0].keyword is None and not call.args[0].star:
            base = self.value(call.args[0].value, env)  # torch.transpose(batch, 1, 2): as batch.transpose(1, 2)
            if env is None and base is not None and base.kind == PB and not base.module:
                return V(PITEM, group=base.group, param=base.param)
            if base is not None and base.kind == CPUB:
                return V(CPU, group=base.group)
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

    def element(self, v: V | None) -> V | None:
        """What iterating (or unpacking) ``v`` yields."""
        if v is None:
            return None
        if v.kind == LOADER:
            return V(CPUB)
        if v.kind == LOADERS:
            return V(LOADER)
        if v.kind == CPUB:
            return V(CPU, group=v.group)
        if v.kind == DEVB:
            return V(DEV)
        if v.kind == FED:
            return v
        if v.kind in (PB, PITEM) and not v.module:  # batch_x, batch_y = batch_x (a step's parameter)
            return V(PITEM, group=v.group, param=v.param)
        if v.kind in TENSORS and not v.module:
            return V(v.kind)
        return None
