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
* ``CPUDEV``: a device object or string that names the CPU;
* ``PARAM``: a parameter of a module-level function (unknown, but a same-module call site may
  tell: ``train(model, loader)`` with a moved model and a ``DataLoader``);
* ``PB``/``PITEM``: a batch (and its items) from iterating something unknown (a parameter,
  ``self.loader``); items of one batch share a *group*. Once some item of a group is moved to a
  device, the others are known to be CPU-side too (the author's own code says where the data
  comes from and where the model lives);
* ``ENUM``/``ZIP``: ``enumerate(loader)``/``zip(a, b)`` bound to a name before the loop.

Anything else, a helper's return value, an unresolved call, is unknown (``None``) and never
leads to a finding.
"""

from __future__ import annotations

import libcst as cst

from .batches import BATCH_PARAMS, batch_call
from .branch_joins import BranchJoins
from .expression_kinds import ExpressionKinds, _aligned
from .flow_frames import ClassInfo, Frame
from .flow_kinds import (  # noqa: F401  (MIXB re-exported: the rules import the kinds from here)
    _LOCAL_KINDS, CPU, CPUB, CPUDEV, DEV, DEVB, ENUM, INP, LOADER, MIXB, MODEL, PARAM, PB, PITEM, TENSORS, ZIP, V,
)
from .flow_tables import (
    _DEFAULT_DEVICE, _not_item_name, _MODULE_NAME, _NOT_COMPUTING, _PASSTHROUGH_ITER, _SCALAR_ANNOTATIONS,
    moved_text_items,
)
from .flow_tables import DTYPES, FACTORIES, LEGACY_CONSTRUCTORS, _JOINS, _MODEL_METHODS  # noqa: F401  (re-exported)
from .guards import string_value
from .handed_on import handed_on_only
from .later_moves import collected, copies, moves_items, read_names
from .lightning_steps import WEIGHTED_LAYER
from .literal_fields import literal_fields, literal_targets
from .model_call_check import ModelCallCheck, _cpu_side_item  # (DEV103 imports _cpu_side_item from here)
from .modules import is_module_class
from .move_evidence import MoveEvidence
from .names import dotted
from .partial_batches import PartialBatches
from .patterns import captures
from .rule import Analysis
from .tuple_annotations import scalar_fields
from .wrapped_models import WrappedModels, mentions_wrapper


class DeviceFlow(Analysis, PartialBatches, BranchJoins, ExpressionKinds, ModelCallCheck, MoveEvidence):
    """Scope-level device dataflow (see the module docstring)."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.frame = Frame("module", None, None, None, None)
        self.classes: list[ClassInfo] = []
        self.local_modules: set[str] = set()
        self.summaries: dict[str, V] = {}
        #: id of a class's :class:`ClassInfo` -> its methods whose every ``return`` is a CPU
        #: tensor (as :attr:`summaries` for module-level functions), once the method is walked
        self.cpu_methods: dict[int, set[str]] = {}
        #: same-module functions that return device tensors (a ``collate_fn`` that moves the
        #: batch), classes whose ``__getitem__`` does, and names bound to such a dataset: a
        #: DataLoader over them yields batches already on the device
        self.device_collates: set[str] = set()
        self.device_datasets: set[str] = set()
        self.device_dataset_names: set[str] = set()
        self._branches: list[list] = []
        #: ``try`` statements being walked: [node, the names at the end of its body or None,
        #: the names at the end of each handler that falls through, frame]
        self._tries: list[list] = []
        #: the kinds of the subjects of the ``match`` statements being walked
        self._subjects: list[V | None] = []
        self._memo: dict[int, V | None] = {}
        #: the CPU-side argument of the last :meth:`check_call` (a :class:`libcst.Arg`), or None
        self.culprit: cst.Arg | None = None
        text = ctx.text
        self.file_silent = (".prepare(" in text and "accelerat" in text) or "setup_dataloaders" in text or "Fabric(" in text
        #: the file calls nn.DataParallel, which scatters CPU inputs itself (DEV103 and the
        #: Lightning reading stay silent in such a file; DEV111 asks :attr:`wrapped_models`)
        self.scatters = mentions_wrapper(text)
        #: the models the file wraps in nn.DataParallel (:mod:`devlint.wrapped_models`)
        self.wrapped_models = WrappedModels(None)
        #: torch.set_default_device("cuda") (or a CUDA default tensor type): a factory without
        #: device= then allocates on that device, so it is no CPU tensor
        self.default_device = bool(_DEFAULT_DEVICE.search(text))
        #: text-like item names the file moves to a device somewhere (token ids, not strings)
        self.moved_texts = moved_text_items(text)
        #: module-level function -> positional parameter names (``None``: defined twice)
        self.signatures: dict[str, list[str] | None] = {}
        #: function name -> [(positional kinds, keyword kinds, has *args/**kwargs)] per call site
        self.call_sites: dict[str, list[tuple[list, dict, bool]]] = {}
        self.functions: set[str] = set()
        #: (frame id, name) -> the literal fields of the batches of a loader rebuilt by a
        #: comprehension (``loader = [b + ({},) for b in loader]``, :mod:`devlint.literal_fields`)
        self.literal_loaders: dict[tuple[int, str], tuple[int, frozenset[int]]] = {}
        self._init_partial(_cpu_side_item, _NOT_COMPUTING, self._device_move, self._other_value)

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

    def scattering(self, call: cst.Call) -> bool:
        """May ``call`` hand its arguments to a model wrapped in ``nn.DataParallel``, which
        places its inputs itself (:meth:`devlint.wrapped_models.WrappedModels.reaches`)?"""
        return self.wrapped_models.reaches(call, self.frame)

    def is_self(self, expr: cst.BaseExpression) -> bool:
        return expr.__class__ is cst.Name and self.frame.self_name is not None and expr.value == self.frame.self_name

    # ---- calls --------------------------------------------------------------------------

    # ---- bindings -----------------------------------------------------------------------

    def _set(self, name: str, v: V | None, scope: dict | None) -> None:
        if scope is not None:
            scope[name] = v
            return
        self.frame.vars[name] = v
        self.literal_loaders.pop((id(self.frame), name), None)
        if not (v is not None and v.kind == PARAM and v.param is not None and v.param[1] == name):
            self.frame.rebound.add(name)  # x = x keeps the parameter an item of its batch
        if v is not None and v.kind == DEV and (v.module or _MODULE_NAME.search(name)):
            self.frame.moved = True
        if v is not None and v.group is not None and v.kind in (DEV, DEVB) and self._read_later(name):
            self.frame.moved_groups.add(v.group)

    def _read_later(self, name: str) -> bool:
        """Is ``name`` read anywhere in the frame's function (a move into a dead name is no evidence)?"""
        reads = self._reads()
        return reads is None or name in reads

    def _reads(self) -> frozenset[str] | None:
        """The names the frame's function (or module) reads, :func:`read_names`."""
        node = self.frame.node
        if not isinstance(node, (cst.FunctionDef, cst.Module)):
            return None
        return self.ctx.remembered("read-names", node, lambda: read_names(node))

    def bind(self, target: cst.BaseExpression, value_expr: cst.BaseExpression | None, v: V | None, scope: dict | None = None) -> None:
        """Bind an assignment target to ``v`` (the kind of ``value_expr``)."""
        if target.__class__ is cst.Name:
            self._set(target.value, v, scope)
        elif target.__class__ is cst.Attribute:
            if scope is None and self.is_self(target.value) and self.frame.cls is not None:
                if v is not None and (v.kind in _LOCAL_KINDS or v.group is not None):
                    v = None  # a batch of this call or a parameter: means nothing in other methods
                attrs = self.frame.cls.attrs
                held = attrs.get(target.attr.value, v)
                if v is not None and v.kind == CPUDEV and target.attr.value in attrs and (held is None or held.kind != CPUDEV):
                    v = None  # if cuda: self.device = "cuda" / else: self.device = "cpu": either device
                attrs[target.attr.value] = v
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            if isinstance(value_expr, (cst.Tuple, cst.List)) and len(value_expr.elements) == len(elements) and not any(
                e.__class__ is cst.StarredElement for e in (*elements, *value_expr.elements)
            ):
                for t, e in zip(elements, value_expr.elements):
                    self.bind(t.value, e.value, self.value(e.value, scope), scope)
                return
            unpacked = scope is None and value_expr is not None and (v is None or v.kind in (PARAM, PITEM)) and (
                self.param_group(value_expr) is not None)
            if unpacked:  # batch_x, batch_y = batch_x of a step function's parameter: one batch's items
                v = V(PB, group=id(target))
            inner = self.element(v)
            if v is None and scope is None and value_expr is not None and value_expr.__class__ is cst.Call:
                group = self.parsed_group(value_expr)  # imgs, pids = self.parse_data_for_train(data)
                inner = V(PITEM, group=group) if group is not None else None
            scalars = scalar_fields(self.frame.node, value_expr.value, len(elements)) if unpacked and (
                value_expr.__class__ is cst.Name) else frozenset()
            for i, t in enumerate(elements):
                if t.__class__ is cst.StarredElement or i in scalars:  # reward of a Tuple[Tensor, float, ...]
                    self.bind(t.value, None, None, scope)
                elif isinstance(t.value, (cst.Tuple, cst.List)):
                    self.bind(t.value, None, v if v is not None and v.kind in (CPUB, DEVB, PB) else inner, scope)
                else:
                    self.bind(t.value, None, inner, scope)
            if unpacked:
                # y.to(d) anywhere in the body says x came unmoved (``pair`` itself: the items' root)
                body = self.frame.node.body
                seen = self.ctx.remembered("later-moves", body, lambda: collected(body, remembered=self.ctx.remembered))
                names = [value_expr.value, *(n.value for n in _names_in(target))]
                if moves_items(body, names, self._device_move, self._other_value, seen, reads=self._reads):
                    self.frame.moved_groups.add(id(target))
        elif target.__class__ is cst.Subscript and scope is None:
            base = target.value
            if base.__class__ is cst.Name and base.value in self.frame.vars:
                held = self.frame.vars[base.value]
                # pe[:, 0::2] = ...: writing into a tensor keeps its device; batch["x"] = ...: mixed from now on
                if held is None or held.kind not in TENSORS or held.module:
                    self.frame.vars[base.value] = None
        self._memo.clear()

    def _bind_iteration(self, target, iter_expr, scope: dict | None, env=None) -> None:
        """``for target in iter_expr``: loaders yield CPU batches; enumerate/zip/tqdm pass through."""
        if iter_expr.__class__ is cst.Call:
            func = iter_expr.func
            fname = dotted(func) or ""
            last = fname.rsplit(".", 1)[-1]
            args = [a.value for a in iter_expr.args if a.keyword is None and not a.star]
            if last == "enumerate" and args and target.__class__ is cst.Tuple and len(target.elements) == 2:
                self.bind(target.elements[0].value, None, None, scope)
                self._bind_iteration(target.elements[1].value, args[0], scope, env)
                return
            if last == "zip" and target.__class__ is cst.Tuple and len(target.elements) == len(args):
                # zip(loader1, loader2) of loaders it cannot see: one step's batches, one group
                # (moving x2 of ``(x1, _), (x2, _)`` says x1 came unmoved too)
                shared = scope is None and len(args) > 1 and len(args) == len(iter_expr.args) and all(
                    a.__class__ in (cst.Name, cst.Attribute) for a in args)
                for t, a in zip(target.elements, args):
                    v = self.value(a, env) if shared else None
                    if shared and (v is None or v.kind in (PARAM, PITEM)) and not self.is_self(a):
                        self._bind_value_iteration(t.value, v, id(iter_expr), scope)
                    else:
                        self._bind_iteration(t.value, a, scope, env)
                return
            if last == "zip":
                self.bind(target, None, None, scope)
                return
            if last in _PASSTHROUGH_ITER and args:
                self._bind_iteration(target, args[0], scope, env)
                return
            if last in ("items", "values") and func.__class__ is cst.Attribute:
                base = self.value(func.value, env)
                inner = None
                if base is not None and base.kind in (CPUB, DEVB):
                    inner = V(CPU if base.kind == CPUB else DEV)
                elif base is not None and base.kind == PB:
                    inner = V(PITEM, group=base.group, param=base.param)
                if last == "items" and target.__class__ is cst.Tuple and len(target.elements) == 2:
                    self.bind(target.elements[0].value, None, None, scope)
                    self.bind(target.elements[1].value, None, inner, scope)
                else:
                    self.bind(target, None, inner if last == "values" else None, scope)
                return
        if self.frame.forward and iter_expr.__class__ is cst.Attribute and self.is_self(iter_expr.value):
            cls = self.frame.cls
            if cls is not None and iter_expr.attr.value not in cls.param_attrs:
                # for block in self.blocks: a submodule, whose output is on the module's device
                self.bind(target, None, V(INP, module=True), scope)
                return
        v = self.value(iter_expr, env)
        key = id(iter_expr) if isinstance(iter_expr, (cst.Name, cst.Attribute, cst.Subscript)) or _yields_batches(iter_expr) else None
        self._bind_value_iteration(target, v, key, scope)

    def _bind_value_iteration(self, target, v: V | None, key: int | None, scope: dict | None) -> None:
        """``for target in <a value of kind v>``; ``key`` names the batch group that iterating
        an unknown name (a parameter, ``self.loader``) yields (``None``: no group)."""
        if v is not None and v.kind == ENUM:
            if target.__class__ is cst.Tuple and len(target.elements) == 2:
                self.bind(target.elements[0].value, None, None, scope)
                self._bind_value_iteration(target.elements[1].value, v.origins[0], key, scope)
            else:
                self.bind(target, None, None, scope)
            return
        if v is not None and v.kind == ZIP:
            if target.__class__ is cst.Tuple and len(target.elements) == len(v.origins):
                for i, (t, inner) in enumerate(zip(target.elements, v.origins)):
                    self._bind_value_iteration(t.value, inner, None if key is None else key + i + 1, scope)
            else:
                self.bind(target, None, None, scope)
            return
        if scope is None and key is not None and (v is None or v.kind in (PARAM, PITEM)):
            self.bind(target, None, V(PB, group=key, param=v.param if v is not None else None), scope)
            return
        if scope is None and v is not None and v.kind == LOADER:
            # for x, y in DataLoader(...): CPU items of one batch (group), moved one by one
            self.bind(target, None, V(CPUB, group=id(target)), scope)
            return
        self.bind(target, None, self.element(v) if v is None or v.kind != CPUB else V(CPU), scope)

    # ---- hooks --------------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        is_module = is_module_class(node, self.ctx, self.local_modules)
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
        if cls is not None and positional and any(dotted(d.decorator) == "classmethod" for d in node.decorators):
            frame.owner = positional[0].name.value  # cls: the class, no item of a batch
        plain = cls is None and self.frame.kind == "module"
        fname = node.name.value
        if plain:
            self.signatures[fname] = None if fname in self.signatures else [p.name.value for p in positional]
        options = (self.ctx.remembered("handed-on", node, lambda: handed_on_only(node, self.ctx.remembered))
                   if not frame.forward else set())
        for param in (*positional, *params.kwonly_params):
            name = param.name.value
            frame.vars[name] = V(PARAM, param=(fname, name)) if plain else None
            if frame.forward and name != self_name and _may_be_tensor(param):
                frame.vars[name] = V(INP)
            elif name in BATCH_PARAMS and not frame.forward and name != self_name:
                # def train_step(model, batch, device): one batch, its items one group
                frame.vars[name] = V(PB, group=id(param), param=(fname, name) if plain else None)
            elif (not frame.forward and name not in (self_name, frame.owner) and not _not_item_name(name)
                  and _may_be_item(param) and name not in options):  # (a device, a config, a counter: no item)
                frame.params.add(name)
                if not plain:  # def encode_batch(self, wavs, lens): items of the batch handed in
                    frame.vars[name] = V(PITEM, group=id(node))
        for star in (params.star_arg, params.star_kwarg):
            if star.__class__ is cst.Param:
                frame.vars[star.name.value] = None
        self.frame = frame
        self._memo.clear()
        batches = [n for n, v in frame.vars.items() if v is not None and v.kind == PB]
        if frame.params or batches:  # def train_step(model, x, y): y.to(d) anywhere says x came unmoved
            self._note_later_moves(node.body, sorted(frame.params) + batches)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.frame
        self.frame = frame.parent
        self._memo.clear()
        placed = any(r is not None and not r.module and r.kind in (DEV, DEVB) for r in frame.returns)
        if frame.cls is not None and frame.name == "__getitem__" and placed:
            self.device_datasets.add(frame.cls.name)
        if frame.cls is not None and frame.self_name is not None and _all_cpu(frame.returns):
            self.cpu_methods.setdefault(id(frame.cls), set()).add(node.name.value)
        if frame.parent is not None and frame.parent.kind == "module" and frame.cls is None:
            (self.device_collates.add if placed else self.device_collates.discard)(node.name.value)
            returns = frame.returns
            kinds = {r.kind if r is not None and not r.module and not r.explicit else None for r in returns}
            name = node.name.value
            if returns and kinds <= {CPU, CPUB} and None not in kinds:
                self.summaries[name] = V(CPUB) if CPUB in kinds else V(CPU)
            elif returns and kinds == {LOADER}:
                self.summaries[name] = V(LOADER)  # def make_loader(...): return DataLoader(...)
            else:
                self.summaries.pop(name, None)
        self.frame.vars.pop(node.name.value, None)

    def visit_Module(self, node: cst.Module) -> None:
        if self.scatters:
            self.wrapped_models = WrappedModels(node)
        self.functions = {s.name.value for s in node.body if s.__class__ is cst.FunctionDef}
        self.function_defs = {s.name.value: s for s in node.body if s.__class__ is cst.FunctionDef}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if func.__class__ is cst.Name and func.value in self.functions and not self.silent:
            positional = [self.value(a.value) for a in node.args if a.keyword is None and not a.star]
            keywords = {a.keyword.value: self.value(a.value) for a in node.args if a.keyword is not None}
            starred = any(a.star for a in node.args)
            self.call_sites.setdefault(func.value, []).append((positional, keywords, starred))

    def visit_Return(self, node: cst.Return) -> None:
        self.frame.returns.append(self.value(node.value) if node.value is not None else None)

    def leave_Assign(self, node: cst.Assign) -> None:
        placing = node.value.__class__ is cst.Call and self._placing_dataset(node.value)
        for target in node.targets:
            name = dotted(target.target)
            if name is not None:
                (self.device_dataset_names.add if placing else self.device_dataset_names.discard)(name)
        groups = self.frame.moved_groups
        before = frozenset(groups)
        v = self.value(node.value)
        if len(groups) > len(before) and (all(
                t.target.__class__ is cst.Name and not self._read_later(t.target.value) for t in node.targets) or (
                node.value.__class__ is cst.Call and copies(node.value, {n.value for t in node.targets for n in _names_in(t.target)}))):
            groups.intersection_update(before)  # data_cuda = data.to(d) never read, adv = x.clone().to(d): no evidence
        for target in node.targets:
            self.bind(target.target, node.value, v)
        if len(node.targets) == 1 and node.targets[0].target.__class__ is cst.Name:
            fields = literal_fields(node.value)
            if fields is not None:
                self.literal_loaders[(id(self.frame), node.targets[0].target.value)] = fields
        self._note_params(node)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.bind(node.target, node.value, self.value(node.value))

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        if node.target.__class__ is cst.Name:
            held = self.value(node.target)
            if held is not None and not held.module and held.kind in (CPU, PITEM, DEV):
                return  # x += noise on a tensor works in place: x stays where it is (check_in_place)
            v = self._combine((node.target, node.value), None)
            self.bind(node.target, None, v)

    def visit_For(self, node: cst.For) -> None:
        self._bind_iteration(node.target, node.iter, None)
        if node.iter.__class__ is cst.Name and (id(self.frame), node.iter.value) in self.literal_loaders:
            for target in literal_targets(node.target, self.literal_loaders[(id(self.frame), node.iter.value)]):
                self.bind(target, None, None)  # for ..., state in [b + ({},) for b in loader]: a literal, no item
        self._memo.clear()
        names = [n.value for n in _names_in(node.target)]
        # for _ in range(steps): x = data["x"][ids]; ...data["y"][ids].to(d): a step loop that
        # indexes the parameters moves their items in its body, not on the function's straight path
        frame = self.frame
        names += [p for p in sorted(frame.params) if p not in frame.rebound and p not in names]
        self._note_later_moves(node.body, names)

    def _note_later_moves(self, body: cst.CSTNode, names: list[str]) -> None:
        """The batch groups of ``names`` count as moved from the start of ``body`` when the
        body moves one of their items anywhere (``model(x.to(d))`` before ``y.to(d)``)."""
        frame = self.frame
        groups: dict[int, list[str]] = {}
        for name in names:
            v = frame.vars.get(name)
            if v is not None and v.group is not None and v.kind in (PB, PITEM, CPU, CPUB):
                groups.setdefault(v.group, []).append(name)
            elif name in frame.params:
                groups.setdefault(id(frame.node), []).append(name)
        for group, members in groups.items():
            seen = self.ctx.remembered("later-moves", body, lambda: collected(body, remembered=self.ctx.remembered))
            if group not in frame.moved_groups and moves_items(
                    body, members, self._device_move, self._other_value, seen, related=names, reads=self._reads):
                frame.moved_groups.add(group)

    def _other_value(self, expr: cst.BaseExpression) -> bool:
        """``x`` of ``device = x.device``: a value, not ``self`` nor a model (which say where
        the model lives)."""
        name = dotted(expr)
        return name is None or not (name.split(".")[0] == self.frame.self_name or self.model_named(expr))

    def _device_move(self, call: cst.Call) -> bool:
        """``.cuda()`` or ``.to(<a device>)``: not a dtype, not the CPU, not ``y.device``."""
        if call.func.attr.value == "cuda":
            return True
        target = next((a.value for a in call.args if (a.keyword is None and not a.star) or (
            a.keyword is not None and a.keyword.value == "device")), None)
        if target is None or self.is_dtype(target) or self.is_cpu_device(target):
            return False
        return not _aligned(call, self.frame.self_name, self.frame.params)

    def visit_Match(self, node: cst.Match) -> None:
        self._subjects.append(self.value(node.subject))

    def leave_Match(self, node: cst.Match) -> None:
        self._subjects.pop()

    def visit_MatchCase(self, node: cst.MatchCase) -> None:
        if self._subjects:  # case {"x": x, "y": y}: items of the subject, as x, y = batch binds
            items = lambda v: self.element(v) if v is not None and v.kind in (PB, CPUB, DEVB) else None  # noqa: E731
            for name, v in captures(node.pattern, self._subjects[-1], items):
                self.bind(name, None, v)

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if call.__class__ is cst.Call and call.func.__class__ is cst.Attribute:
            method, receiver = call.func.attr.value, call.func.value
            if method in ("to", "cuda", "cpu") and isinstance(receiver, (cst.Name, cst.Attribute)):
                base = self.value(receiver)
                if base is not None and base.kind in (PARAM, PITEM):
                    base = None  # model.to(device) on a parameter: now a moved model
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

    def _number(self, value: cst.BaseExpression) -> bool:
        """A number literal, or a parameter of the current method whose default is one."""
        if isinstance(value, (cst.Integer, cst.Float)):
            return True
        fn = self.frame.node
        if value.__class__ is cst.Name and fn.__class__ is cst.FunctionDef:
            for param in (*fn.params.params, *fn.params.kwonly_params):
                if param.name.value == value.value:
                    return isinstance(param.default, (cst.Integer, cst.Float))
        return False

    def _note_params(self, node: cst.Assign) -> None:
        cls = self.frame.cls
        if cls is None or not cls.is_module:
            return
        for target in node.targets:
            t = target.target
            if t.__class__ is cst.Attribute and self.is_self(t.value):
                if self._number(node.value):
                    cls.scalar_attrs.add(t.attr.value)
                else:
                    cls.scalar_attrs.discard(t.attr.value)
            if t.__class__ is cst.Attribute and self.is_self(t.value) and node.value.__class__ is cst.Call:
                name = self.ctx.resolve(node.value.func) or ""
                if name.endswith(("Parameter", "Buffer")):
                    cls.param_attrs.add(t.attr.value)
                elif name.startswith("torch.nn.") and name.rsplit(".", 1)[-1][:1].isupper() and name[-7:] != "CTCLoss":
                    cls.torch_modules.add(t.attr.value)
                    if WEIGHTED_LAYER.search(name.rsplit(".", 1)[-1]):
                        cls.weighted_layers.add(t.attr.value)


def _all_cpu(returns: list[V | None]) -> bool:
    """Is every value a function returns a CPU tensor (no module, not placed explicitly)?"""
    kinds = {r.kind if r is not None and not r.module and not r.explicit else None for r in returns}
    return bool(returns) and kinds <= {CPU, CPUB} and None not in kinds


def _yields_batches(expr: cst.BaseExpression) -> bool:
    """``for batch in make_batches(...)``, ``for u, i in self.sampler.sample(X)`` (:func:`batch_call`)."""
    return expr.__class__ is cst.Call and batch_call(dotted(expr.func) or "")


def _names_in(target: cst.BaseExpression) -> list[cst.Name]:
    """The names an assignment or loop target binds (``x``, ``(x, y), z``, ``*rest``)."""
    if target.__class__ is cst.Name:
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names_in(e.value)]
    if target.__class__ is cst.StarredElement:
        return _names_in(target.value)
    return []


def _may_be_item(param: cst.Param) -> bool:
    """May a step function's parameter be a tensor of its batch: no default other than ``None``
    and no annotation, or one that names a ``Tensor``?"""
    default = param.default
    if default is not None and not (default.__class__ is cst.Name and default.value == "None"):
        return False
    return param.annotation is None or "Tensor" in cst.Module([]).code_for_node(param.annotation.annotation)


def _may_be_tensor(param: cst.Param) -> bool:
    """A ``forward`` parameter that may hold a tensor (no scalar default, no scalar annotation)."""
    default = param.default
    if default is not None and not (default.__class__ is cst.Name and default.value == "None"):
        return False
    if param.annotation is not None:
        text = cst.Module([]).code_for_node(param.annotation.annotation)
        if text in _SCALAR_ANNOTATIONS or text.startswith(("int", "float", "bool", "str", "Optional[int", "Optional[bool")):
            return False
    return True

