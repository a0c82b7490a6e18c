"""DEV111's reading of a partly moved batch where it meets no model call the linter can name.

Mixed into :class:`devlint.dataflow.DeviceFlow`. Once the author moves some items of a batch
to a device (the batch's *group* is in ``frame.moved_groups``), an item of it left on the CPU
is a bug wherever it meets the moved ones in a computation. These are the places real loops
do that without a call of ``model(...)`` or ``criterion(...)``:

* a container that holds moved items and an item left behind (``sample = {"net_input":
  {"src_tokens": src_tokens, "src_lengths": src_lengths.cuda()}}``, ``torch.cat([a, b.to(d)])``):
  the kind ``MIXB``, flagged where a computing call receives it;
* a helper handed the model with the input left behind (``avalanche_forward(model, x,
  task_labels)``: the first argument after the model is the model's input; later ones may stay
  on the CPU by design, as task labels do);
* a module held by ``self`` (``self.hparams.normalizer(mel, lens)``, ``self.infer = ...``) or a
  method of the class that moves nothing itself, given moved items and one left behind;
* the output of a call given the input left behind (``pred = self.get_logits(x)``), when it
  reaches a loss or a model: the kind ``FED``, reported at that call (:attr:`fed_hits`);
* the items a helper parses out of one unmoved batch (``imgs, pids =
  self.parse_data_for_train(data)``): items of that batch.

A function or method of this file that moves one of its own parameters is trusted to move
what it is handed, and is never such a helper.
"""

from __future__ import annotations

import re

import libcst as cst

from .flow_kinds import CPU, DEV, DEVB, FED, MIXB, MODEL, PARAM, PB, PITEM, V
from .held_params import only_held
from .later_moves import moves_items
from .names import dotted

#: receivers that dispatch to callbacks or hooks (which compute nothing with the batch themselves)
DISPATCH = re.compile(r"callback|hook", re.I)
#: argument names that say the callee places what it returns (``prepare_batch(batch, device)``)
_DEVICE_ARG = re.compile(r"device", re.I)
#: annotations that may hold a tensor (anything else, ``List[str]``, ``int``, says it holds none)
_MAY_HOLD_TENSORS = re.compile(r"Tensor|tensor|Any|Batch|batch|Dict|dict|Mapping|Sequence|Tuple|tuple|Union|\|")


def _param_of(function: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> cst.Param | None:
    """The parameter of ``function`` (a method called on ``self``, or a function of the module
    called by its name) that ``arg`` of ``call`` lands on."""
    params = [*function.params.posonly_params, *function.params.params]
    if call.func.__class__ is cst.Attribute:
        params = params[1:]  # after self
    if arg.keyword is not None:
        params = [p for p in (*params, *function.params.kwonly_params) if p.name.value == arg.keyword.value]
        return params[0] if params else None
    index = [a for a in call.args if a.keyword is None and not a.star].index(arg)
    return params[index] if index < len(params) else None


def _declared_no_tensor(function: cst.FunctionDef | None, call: cst.Call, arg: cst.Arg) -> bool:
    """Does the function ``call`` runs (``self.f(...)``, ``f(...)``) annotate the parameter ``arg`` lands on
    with a type that is no tensor (``answers: List[str]``), or only hold it
    (:func:`devlint.held_params.only_held`: ``out.set(key, value)``, ``generation_config=cfg``)?"""
    if function is None:
        return False
    param = _param_of(function, call, arg)
    if param is None:
        return False
    if only_held(function, param.name.value):
        return True
    if param.annotation is None:
        return False
    return not _MAY_HOLD_TENSORS.search(cst.Module([]).code_for_node(param.annotation.annotation))


def _nested_def(function, name: str) -> cst.FunctionDef | None:
    """The ``def name`` written in ``function``'s body (not inside another ``def`` or class), or
    ``None`` (also when ``function`` is no function or defines ``name`` more than once)."""
    if function.__class__ is not cst.FunctionDef:
        return None
    found = []
    stack = list(function.body.children)
    while stack:
        node = stack.pop()
        if node.__class__ is cst.FunctionDef:
            if node.name.value == name:
                found.append(node)
        elif node.__class__ is not cst.ClassDef and not isinstance(node, cst.BaseExpression):
            stack.extend(node.children)
    return found[0] if len(found) == 1 else None


class PartialBatches:
    """The partly-moved-batch readings of :class:`devlint.dataflow.DeviceFlow` (see the module
    docstring). Needs the flow's ``frame``, ``value``, ``param_group``, ``model_named``,
    ``loss_named``, ``is_self``, ``functions``, ``ctx`` and the module-level helpers it passes in
    :meth:`_init_partial`."""

    def _init_partial(self, cpu_side, not_computing, device_move, other_value) -> None:
        self._cpu_side, self._not_computing = cpu_side, not_computing
        self._device_move_fn, self._other_value_fn = device_move, other_value
        #: id of a call given an input left behind whose output reached a loss or a model ->
        #: (the call, its top-level statement index, the argument left behind)
        self.fed_hits: dict[int, tuple[cst.Call, int, cst.Arg]] = {}
        self.function_defs: dict[str, cst.FunctionDef] = {}
        self._moving: dict[int, bool] = {}

    # ---- what a callee is ---------------------------------------------------------------
    def moves_its_inputs(self, function: cst.FunctionDef) -> bool:
        """Does ``function`` move one of its own parameters anywhere in its body?"""
        key = id(function)
        if key not in self._moving:
            params = function.params
            names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
            self._moving[key] = moves_items(function.body, names, self._device_move_fn, self._other_value_fn, straight=False)
        return self._moving[key]

    def _own_definition(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """The ``def`` of this file a call of ``func`` runs: a module-level function, or a
        method of the enclosing class called on ``self``."""
        if func.__class__ is cst.Name:
            return self.function_defs.get(func.value)
        cls = self.frame.cls
        if func.__class__ is cst.Attribute and self.is_self(func.value) and cls is not None and func.attr.value in cls.methods:
            body = cls.node.body
            for statement in getattr(body, "body", ()):
                if statement.__class__ is cst.FunctionDef and statement.name.value == func.attr.value:
                    self.ctx.note_read(statement)
                    return statement
        return None

    def computes(self, func: cst.BaseExpression) -> bool:
        """May a call of ``func`` compute with its tensor arguments, without moving them itself?
        Not a builtin, a container's or a logger's method, a callback dispatch, nor a function
        or method of this file that moves one of its parameters."""
        name = dotted(func)
        if name is None or DISPATCH.search(name) or name == self.frame.owner:
            return False  # (``cls(...)`` in a classmethod builds an instance)
        last = name.rsplit(".", 1)[-1]
        if last in self._not_computing or last.startswith(("log", "print", "save", "record", "write")):
            return False
        own = self._own_definition(func)
        if own is not None:
            return not self.moves_its_inputs(own)
        return func.__class__ is not cst.Name or name not in self.functions

    def _self_held(self, func: cst.BaseExpression) -> bool:
        """``self.infer(...)``, ``self.hparams.normalizer(...)``: something the object holds, or
        one of its methods."""
        name = dotted(func)
        return name is not None and "." in name and name.split(".", 1)[0] == self.frame.self_name

    def _built_submodule(self, func: cst.BaseExpression) -> bool:
        """``self.embed_user``: an attribute the class binds to a module it builds (``nn.Embedding(...)``,
        a module class of this file) and never to anything else, called in a method that is no
        ``forward``. It computes on the device its object lives on, which the author's moves in
        this method name; unlike ``self.infer``, which may be a helper that places its input."""
        if func.__class__ is not cst.Attribute or not self.is_self(func.value) or self.frame.forward:
            return False
        cls = self.frame.cls
        if cls is None or func.attr.value in cls.methods:
            return False
        v = cls.attrs.get(func.attr.value)
        return v is not None and v.module and v.kind in (MODEL, DEV) and not v.loss

    def _model_value(self, expr: cst.BaseExpression, v: V | None) -> bool:
        """An argument that is a model (a module value, or a name that says "model")."""
        if v is not None and v.module:
            return True
        return (v is None or v.kind in (PARAM, PITEM)) and self.model_named(expr)

    # ---- items --------------------------------------------------------------------------
    def left_behind(self, arg_value: cst.BaseExpression, v: V | None, groups: set[int]) -> bool:
        """Is ``arg_value`` (of kind ``v``) an item of one of ``groups`` still on the CPU (not
        one that stays there by design, as lengths and file names do)?"""
        if self._cpu_side(arg_value) or self._moved_as_copy(arg_value):
            return False
        if v is None or v.kind == PARAM:
            return self.param_group(arg_value) in groups
        return not v.module and not v.explicit and v.kind in (CPU, PITEM) and v.group in groups

    def mixed_container(self, values: list, stars: list, env) -> V | None:
        """``MIXB`` for a display holding a moved item of a batch and another left behind."""
        moved = self.frame.moved_groups
        if env is not None or not moved:
            return None
        shown, left = set(), set()
        for value, star in zip(values, stars):
            v = self.value(value, env)
            if v is None or star:
                if v is None and not star and self.param_group(value) in moved and not self._cpu_side(value):
                    left.add(self.param_group(value))
                continue
            if v.kind == MIXB:
                return v
            if v.kind in (DEV, DEVB) and not v.module and v.group in moved:
                shown.add(v.group)
            elif self.left_behind(value, v, moved):
                left.add(v.group if v.kind != PARAM else self.param_group(value))
        common = shown & left
        return V(MIXB, group=common.pop()) if common else None

    def parsed_group(self, call: cst.Call) -> int | None:
        """``imgs, pids = self.parse_data_for_train(data)``: the group of the one unmoved batch
        (or item) the call is given, when it is given no moved value, no device and no model."""
        if self.model_named(call.func) or self.loss_named(call.func) or self._moving_collate(call.func):
            return None  # (a helper of this file that moves something may return its items placed)
        group = None
        for arg in call.args:
            if arg.keyword is not None and _DEVICE_ARG.search(arg.keyword.value):
                return None
            if _DEVICE_ARG.search(dotted(arg.value) or ""):
                return None
            v = self.value(arg.value)
            if v is not None and (v.module or v.kind in (DEV, DEVB, MIXB)):
                return None
            if v is not None and v.kind in (PB, PITEM) and v.group is not None:
                group = v.group if group in (None, v.group) else -1
        return group if group not in (None, -1) else None

    # ---- calls --------------------------------------------------------------------------
    def _input_after_model(self, values: list) -> tuple[cst.Arg, V | None] | None:
        """The first positional argument after a model argument that is no model itself."""
        positional = [(a, v) for a, v in values if a.keyword is None and not a.star]
        for i, (a, v) in enumerate(positional):
            if self._model_value(a.value, v):
                rest = [(b, w) for b, w in positional[i + 1:] if not self._model_value(b.value, w)]
                return rest[0] if rest else None
        return None

    def partly_moved_call(self, call: cst.Call, scatters: bool) -> cst.Arg | None:
        """The argument left behind of a computing helper call that receives a partly moved
        batch, a model and its input left behind, or (a module held by ``self``) moved items
        and one left behind; ``None`` if none. Where ``scatters`` (the call may reach a model
        wrapped in ``nn.DataParallel``, which scatters CPU inputs), only a torch function's own arguments
        (``torch.cat([a, b.to(d)])``) count."""
        moved = self.frame.moved_groups
        if not moved or not self.computes(call.func):
            return None
        values = [(arg, self.value(arg.value)) for arg in call.args]
        torch_function = (self.ctx.resolve(call.func) or "").startswith("torch.")
        for arg, v in values:
            if v is not None and v.kind == MIXB and (torch_function or not scatters):
                return arg
        if scatters:
            return None
        first = self._input_after_model(values)
        if first is not None and self.left_behind(first[0].value, first[1], moved):
            return first[0]
        if self._self_held(call.func):
            shown = {v.group for _, v in values if v is not None and v.kind in (DEV, DEVB) and not v.module and v.group in moved}
            if self._built_submodule(call.func):
                shown = set(moved)  # self.embed_user(us) beside cands_ids.to(self.device): a layer of the module
            own = self._own_definition(call.func)
            for arg, v in values:
                if not arg.star and self.left_behind(arg.value, v, shown) and not _declared_no_tensor(own, call, arg):
                    return arg
        return self._step_function_call(call, values)

    def _step_function_call(self, call: cst.Call, values: list) -> cst.Arg | None:
        """``training_step(image, target)`` with ``image`` moved and ``target`` left behind, where
        ``training_step`` is a ``def`` of this file (a function of the module, or one nested in
        the calling function: a closure over the model and the loss) that computes with what
        it is given where it is (:meth:`_computes_in_place`: it moves nothing and reads nothing
        back to the host), given no model (:meth:`_input_after_model` judges such calls): the
        argument left behind, or ``None``."""
        func = call.func
        if func.__class__ is not cst.Name:
            return None
        own = self.function_defs.get(func.value) or _nested_def(self.frame.node, func.value)
        if own is None or not self._computes_in_place(own) or any(self._model_value(a.value, v) for a, v in values):
            return None  # (given the model too: the first input after it is judged, later ones may stay)
        moved = self.frame.moved_groups
        shown = {v.group for _, v in values if v is not None and v.kind in (DEV, DEVB) and not v.module and v.group in moved}
        for arg, v in values:
            if not arg.star and self.left_behind(arg.value, v, shown) and not _declared_no_tensor(own, call, arg):
                return arg
        return None

    def fed(self, call: cst.Call) -> V | None:
        """``FED`` for the output of a computing call (no model or loss the linter can name)
        whose input, its first positional argument that is no model, was left behind."""
        moved = self.frame.moved_groups
        func = call.func
        if not moved or func.__class__ not in (cst.Name, cst.Attribute) or self.scattering(call):
            return None
        if self.model_named(func) or self.loss_named(func) or not self.computes(func):
            return None
        values = [(arg, self.value(arg.value)) for arg in call.args if arg.keyword is None and not arg.star]
        first = self._input_after_model(values) if any(self._model_value(a.value, v) for a, v in values) else (values[0] if values else None)
        if first is None or not self.left_behind(first[0].value, first[1], moved):
            return None
        return V(FED, origins=(call, self.ctx.statement_index, first[0]))

    def note_fed(self, v: V) -> None:
        """A ``FED`` value reached a loss or a model: its call is the finding."""
        call = v.origins[0]
        self.fed_hits.setdefault(id(call), v.origins)
