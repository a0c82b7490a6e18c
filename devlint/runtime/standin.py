"""A stand-in accelerator that carries real data: device placement bugs found on a CPU.

:class:`Tagged` is a ``__torch_dispatch__`` tensor subclass wrapping a real CPU tensor and
reporting the logical device ``meta`` (a device every torch build has, that no real data
lives on). :class:`StandIn` is a dispatch mode that, while the step runs:

- turns every factory call with ``device="meta"`` (``torch.zeros(n, device=x.device)``,
  ``x.new_zeros``, ``torch.tensor(data, device=...)``) into a CPU tensor tagged ``meta``;
- makes ``.to("meta")`` tag a tensor (so ``model.to(device)`` moves exactly what it moves on
  CUDA) and ``.cpu()`` / ``.to("cpu")`` untag it;
- computes every op on the wrapped CPU tensors, so ``.item()``, data-dependent control flow,
  autocast regions and ``lengths.cpu()`` behave as on a real device, and the numbers equal
  a plain CPU run (the stand-in run doubles as the float32 reference);
- records every op whose tensor arguments mix tagged and untagged tensors, except where CUDA
  accepts a CPU tensor (0-dim tensors, copies, CPU index tensors into a device tensor, ``pack_padded_sequence``
  and ``ctc_loss`` lengths, packed-sequence batch sizes): these are the device-placement
  bugs, named with the module running (``ModuleTracker``) and, where it can be found, the
  parameter, buffer, attribute or factory the CPU tensor comes from;
- records what a GPU refuses besides mixed tensors: ``Tensor.numpy()`` of a tensor on the
  device (``np.percentile(logits)``), ``pack_padded_sequence`` lengths on the device (CUDA
  takes them on the CPU only), and a random op on the device driven by a CPU
  ``torch.Generator`` (:func:`host_generator_key`); ``torch.Generator(device=x.device)`` makes
  a CPU generator that stands in for the device's (:class:`StandInGenerator`).
"""

from __future__ import annotations

import contextlib
import re
import sys
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.module_tracker import ModuleTracker
from torch.utils.weak import WeakIdKeyDictionary

from .cuda_branch import cuda_branch
from .names import running_function

__all__ = ["STAND_IN", "Tagged", "StandIn", "StandInGenerator", "host_generator_key", "Mix", "StandInUnsupported",
           "stand_in", "unregistered_tensors", "module_label", "prefer_foreach"]

STAND_IN = "meta"
_STAND_IN_DEVICE = torch.device(STAND_IN)
_aten = torch.ops.aten
#: Ops that take CPU tensors next to CUDA ones on a real GPU.
CPU_OK = {
    _aten.copy_.default, _aten._to_copy.default, _aten.index.Tensor, _aten.index_put_.default,
    _aten._index_put_impl_.default, _aten.index_put.default, _aten._pack_padded_sequence.default,
    _aten._pack_padded_sequence_backward.default, _aten._pad_packed_sequence.default,
    _aten.ctc_loss.Tensor, _aten._ctc_loss.Tensor, _aten._ctc_loss_backward.Tensor,
    _aten.lstm.data, _aten.gru.data, _aten.rnn_tanh.data, _aten.rnn_relu.data,
    _aten.set_.source_Tensor, _aten.lift_fresh.default, _aten.lift_fresh_copy.default,
}
#: The attributes every ``nn.Module`` has (its parameter, buffer and submodule tables, its hook
#: tables, ``training``): no tensor of the user's is kept there outside the first three.
MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))
#: Ops whose later outputs stay on the CPU even on CUDA (packed-sequence batch sizes).
_FIRST_OUTPUT_ONLY = {_aten._pack_padded_sequence.default}
#: Takes its ``lengths`` on the CPU only, also on CUDA ("'lengths' argument should be a 1D CPU
#: int64 tensor"): lengths on the device are recorded (:meth:`StandIn.host_read`).
_PACK = _aten._pack_padded_sequence.default
#: Indexing takes CPU indices into a device tensor, not device indices into a CPU tensor: CUDA
#: raises "indices should be either on cpu or on the same device as the indexed tensor (cpu)"
#: (``check_indices_on_cpu_or_selfdevice``, aten/src/ATen/native/TensorAdvancedIndexing.cpp,
#: torch 2.13): a noise schedule kept as a plain attribute, indexed by the batch's timesteps.
_INDEXED = {_aten.index.Tensor, _aten.index_put_.default, _aten._index_put_impl_.default, _aten.index_put.default}


class Tagged(torch.Tensor):
    """A real CPU tensor (``.elem``) that reports the stand-in device ``meta``."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        r = torch.Tensor._make_wrapper_subclass(
            cls, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(),
            dtype=elem.dtype, layout=elem.layout, device=_STAND_IN_DEVICE, requires_grad=elem.requires_grad)
        r.elem = elem
        return r

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self):
        return f"Tagged({self.elem!r})"

    def __format__(self, spec):
        # A 0-dim tensor formats as its number on a real device (``f"expert_{idx}"`` in Switch
        # Transformers' router picks ``self.experts["expert_0"]``): torch.Tensor.__format__
        # does that only for plain, non-meta tensors.
        if self.dim() == 0:
            return self.elem.detach().item().__format__(spec)
        return object.__format__(self, spec)

    def numpy(self, *, force: bool = False):
        # a GPU tensor has no numpy view: torch raises "can't convert cuda:0 device type tensor
        # to numpy" unless force=True copies it; recorded, and the data given so the rest of
        # the step is still checked for placement
        if not force and _ACTIVE:
            _ACTIVE[-1].host_read("Tensor.numpy", self)
        return self.elem.numpy(force=force)

    def tolist(self):
        # torch refuses ``tolist`` of any tensor subclass; on a GPU it copies the data to the
        # host (a training step turning rewards into Python floats for a loop): the data's list
        return self.elem.tolist()

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        dev = self.device if device is None else torch.device(device)
        t = torch.tensor(data, dtype=dtype or self.dtype, device="cpu")
        t = Tagged(t) if dev.type == STAND_IN else t.to(dev)
        return t.requires_grad_(requires_grad)

    # ``t[..., [0, 2]]``: torch turns the list into an index tensor on ``t``'s device (here
    # ``meta``, no data) below the Python key; make it a tagged tensor here instead, as it is
    # on a real GPU (Falcon's multi-query ``fused_qkv[..., [-2], :]``).
    def __getitem__(self, index):
        return super().__getitem__(_list_index(index))

    def __setitem__(self, index, value):
        return super().__setitem__(_list_index(index), value)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # Outside StandIn (e.g. printing a loss after the step): compute, keep the tag.
        uargs, ukwargs = _unwrap((args, kwargs or {}))
        out = func(*uargs, **ukwargs)
        return _map(lambda t: _tag(t) if type(t) is torch.Tensor else t, out)


#: The generators :class:`StandInGenerator` made for the stand-in (while it runs; cleared on exit).
_GENERATORS: list = []


class _AnyGenerator(type(torch._C.Generator)):
    """``isinstance(g, torch.Generator)`` stays true of every generator while the stand-in
    puts :class:`StandInGenerator` in ``torch.Generator``'s place."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, torch._C.Generator)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, torch._C.Generator)


class StandInGenerator(torch.Generator, metaclass=_AnyGenerator):
    """``torch.Generator(device=...)`` while the stand-in runs: the stand-in device has no
    generator of its own (torch raises "META device type not an accelerator" for
    ``torch.Generator(device=x.device)``), so a generator asked for it is a CPU generator,
    remembered in ``_GENERATORS`` (a random op of the device may use it); any other device's is made
    as asked."""

    def __new__(cls, device=None):
        return super().__new__(cls, "cpu" if _is_stand_in(device) else device)

    def __init__(self, device=None):
        if _is_stand_in(device):
            _GENERATORS.append(self)


def _same_generator(a, b) -> bool:
    """Whether two generator objects are one generator: torch gives an op a new Python object
    for the same C++ generator, so they are compared by state (two CPU generators with equal
    states are taken for one: a placement bug missed, never a false one)."""
    return a is b or (a.device == b.device and torch.equal(a.get_state(), b.get_state()))


def host_generator_key(gen) -> bool:
    """Whether ``gen`` is a CPU generator a GPU's random op refuses ("Expected a 'cuda' device
    type for generator but found 'cpu'"): a CPU ``torch.Generator`` not made for the stand-in."""
    return isinstance(gen, torch._C.Generator) and gen.device.type == "cpu" \
        and not any(_same_generator(gen, g) for g in _GENERATORS)


#: The stand-in modes running (innermost last), for what a tensor method records.
_ACTIVE: list = []


class Tracker(ModuleTracker):
    """``torch.utils.module_tracker.ModuleTracker`` that survives modules run inside a
    backward pass: a reversible layer (Hugging Face Reformer's ``_ReversibleFunction``)
    recomputes its forward in backward on fresh leaf tensors, and ModuleTracker's gradient
    hooks on those raise ``AssertionError: Expected gradient function to be set``. The module
    is still entered and left (that happens first); only its backward attribution is lost.

    ``backward=False``: the modules of the forward only, without the gradient hooks that
    attribute backward ops to modules (two ``register_multi_grad_hook`` calls per module
    call, ~0.5 plain steps of an EfficientNet-like model's stand-in run). Its ``parents``
    in backward are not the backward's: :class:`StandIn` then sets ``unlabelled`` instead of
    reading them, and the run is redone with ``backward=True`` (only a step whose backward
    mixes devices or makes CPU tensors pays for it)."""

    def __init__(self, backward: bool = True) -> None:
        super().__init__()
        self.backward = backward

    def _fw_pre_hook(self, mod, input) -> None:
        if not self.backward:
            self.parents.add(self._get_mod_name(mod))
            return
        try:
            super()._fw_pre_hook(mod, input)
        except AssertionError:
            pass

    def _fw_post_hook(self, mod, input, output) -> None:
        if not self.backward:
            self.parents.discard(self._get_mod_name(mod))
            return
        try:
            super()._fw_post_hook(mod, input, output)
        except AssertionError:
            pass


class StandInUnsupported(RuntimeError):
    """A tensor the stand-in device cannot hold (a sparse tensor): devlint's limit, not the
    step's fault."""


def _tag(t: torch.Tensor) -> Tagged:
    """``Tagged(t)``, with a lazy ``conj()`` / negative view materialised first: the wrapper
    cannot carry those bits, and a wrapper that says "not conjugated" around a conjugated
    tensor made the backward of complex products wrong (Meta's complex rotary embeddings).

    Raises:
        StandInUnsupported: ``t`` is not strided (``nn.Embedding(sparse=True)`` gradients).
    """
    if t.layout != torch.strided:
        raise StandInUnsupported(f"the stand-in GPU cannot hold {t.layout} tensors (sparse gradients, "
                                 "nn.Embedding(sparse=True)); placement is checked up to there")
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    return Tagged(t)


def _list_index(index):
    """An index with every flat list of ints or bools made a tagged index tensor; anything
    else (nested lists, which torch reads as a tuple, slices, tensors) left as it is."""
    if isinstance(index, tuple):
        return tuple(_list_index(i) for i in index)
    if isinstance(index, list) and index and all(type(i) in (int, bool) for i in index):
        with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEY):
            return Tagged(torch.tensor([int(i) for i in index] if int in map(type, index) else index,
                                       device="cpu"))
    return index


_PYTHON_KEY = torch._C.DispatchKeySet(torch._C.DispatchKey.Python)
_CPU = torch.device("cpu")


def _restride(t: Tagged) -> None:
    """Give the wrapper the shape and strides its ``elem`` has now, after an in-place op that
    changes them (``output.transpose_(0, 1)`` in ``nn.GRU(batch_first=True)``'s C++ kernel):
    the wrapper's own metadata is set below the Python key, where it is a plain meta tensor."""
    e = t.elem
    with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEY):
        torch.ops.aten.as_strided_(t, e.size(), e.stride(), e.storage_offset())


def _same(tagged: list, t: torch.Tensor) -> Tagged:
    """The output ``t`` of an op on the ``tagged`` inputs' elems, tagged: the input itself
    when the op returned its own input (in place), its shape and strides updated if the op
    changed them (``transpose_``, ``squeeze_``, ``as_strided_`` ...), else a new wrapper."""
    for same in tagged:
        if same.elem is t:
            if same.shape != t.shape or same.stride() != t.stride() \
                    or same.storage_offset() != t.storage_offset():
                _restride(same)
            return same
    return _tag(t)


def _flat(obj, out):
    """Append the tensors in a nesting of tuples, lists and dicts to ``out`` (faster than
    pytree, which dominated the stand-in's cost)."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            _flat(v, out)
    elif isinstance(obj, dict):
        for v in obj.values():
            _flat(v, out)
    return out


def _split_args(args: tuple, tagged: list, plain: list) -> tuple:
    """:func:`_split` of an op's positional arguments, the tensors and scalars among them
    handled in this loop (no call per argument: ~5 us of an op's ~35 us on the stand-in)."""
    out = []
    for v in args:
        if type(v) is Tagged:
            tagged.append(v)
            out.append(v.elem)
        elif type(v) in _LEAVES:
            out.append(v)
        else:
            out.append(_split(v, tagged, plain))
    return tuple(out)


#: Argument types that hold no tensor (:func:`_split_args`).
_LEAVES = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                     torch.memory_format})


def _split(obj, tagged: list, plain: list):
    """``obj`` (an op's arguments: tensors in tuples, lists and dict values) with every
    :class:`Tagged` replaced by its ``elem``; the tensors met are appended to ``tagged`` and
    ``plain`` (one pass: the stand-in's per-op cost is mostly this Python)."""
    if isinstance(obj, torch.Tensor):
        if isinstance(obj, Tagged):
            tagged.append(obj)
            return obj.elem
        plain.append(obj)
        return obj
    if type(obj) is tuple:
        return tuple([_split(v, tagged, plain) for v in obj])
    if type(obj) is list:
        return [_split(v, tagged, plain) for v in obj]
    if type(obj) is dict:
        return {k: _split(v, tagged, plain) for k, v in obj.items()}
    return obj


def _map(fn, obj):
    """``fn`` applied to every tensor of a nesting of tuples, lists and dicts."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, list):
        return [_map(fn, v) for v in obj]
    if isinstance(obj, tuple):
        vals = [_map(fn, v) for v in obj]
        return type(obj)(*vals) if hasattr(obj, "_fields") else tuple(vals)
    if isinstance(obj, dict):
        return {k: _map(fn, v) for k, v in obj.items()}
    return obj


def _elem(t):
    return t.elem if isinstance(t, Tagged) else t


def _unwrap(obj):
    return _map(_elem, obj)


def _is_stand_in(device) -> bool:
    if device is None:
        return False
    if isinstance(device, torch.device):
        return device.type == STAND_IN
    try:
        return torch.device(device).type == STAND_IN
    except (RuntimeError, TypeError):
        return False


def module_label(model: torch.nn.Module, parents) -> str:
    """Turn a ``ModuleTracker.parents`` set into a readable module path.

    ``{"Global", "Net", "Net.encoder.fc"}`` becomes ``"encoder.fc (Linear)"``; only
    ``{"Global"}`` means the code ran outside any module (``"loss_fn (outside the model)"``).
    """
    root = type(model).__name__
    names = [p for p in parents if p != "Global"]
    if not names:
        return "loss_fn (outside the model)"
    names.sort(key=lambda n: (n.count("."), n != root))
    name = names[-1]
    if "." in name:
        path = name.split(".", 1)[1]
        try:
            return f"{path} ({type(model.get_submodule(path)).__name__})"
        except AttributeError:
            return path
    if name == root:
        return f"{root} (the model itself)"
    return f"{name} (not a registered submodule of {root})"


def unregistered_tensors(model: torch.nn.Module) -> dict[int, tuple]:
    """Tensors ``model.to(device)`` does not move: id -> (kind, dotted name, holder).

    kind is ``"attribute"`` (a plain tensor attribute, or a tensor in a plain list, tuple or
    dict attribute, ``"rotary.cache['cos']"``: not a buffer either) or ``"list"`` (a
    parameter or buffer of a layer held in a plain list, tuple or dict attribute; holder is
    that layer, ``"layers[0] (Linear)"``).
    """
    found: dict[int, tuple] = {}
    for mname, mod in model.named_modules():
        prefix = f"{mname}." if mname else ""
        for attr, val in vars(mod).items():
            if attr in MODULE_INTERNALS:
                continue
            if isinstance(val, torch.Tensor) and not isinstance(val, torch.nn.Parameter):
                found[id(val)] = ("attribute", prefix + attr, None)
                continue
            items = val.items() if isinstance(val, dict) else (
                enumerate(val) if isinstance(val, (list, tuple)) else ())
            for key, item in items:
                label = f"{prefix}{attr}[{key!r}]" if isinstance(val, dict) else f"{prefix}{attr}[{key}]"
                if isinstance(item, torch.Tensor):  # a cache kept in a plain dict: not a buffer either
                    found.setdefault(id(item), ("attribute", label, None))
                    continue
                if not isinstance(item, torch.nn.Module):
                    continue
                for pname, t in list(item.named_parameters()) + list(item.named_buffers()):
                    found[id(t)] = ("list", f"{label}.{pname}", f"{label} ({type(item).__name__})")
    return found


@dataclass
class Mix:
    """One op that met a CPU tensor next to stand-in tensors.

    ``key`` says where the CPU tensor comes from: ``("id", id)`` a tensor that existed before
    the step (a parameter, attribute, captured tensor), ``("made", op, module)`` a factory
    called inside the step without ``device=``. ``function``: the custom
    ``torch.autograd.Function`` method the op ran in (``"SignSTE.backward"``), if any.
    """

    op: str
    module: str
    key: tuple
    shape: list
    backward: bool
    function: str | None = None


class StandIn(TorchDispatchMode):
    """The dispatch mode of the stand-in device (see the module docstring).

    ``mixes`` collects the :class:`Mix` records; ``ops`` counts the ops seen.
    """

    def __init__(self, tracker: ModuleTracker, model: torch.nn.Module):
        super().__init__()
        self.tracker = tracker
        self.model = model
        self.mixes: list[Mix] = []
        self.made = WeakIdKeyDictionary()
        self.ops = 0
        self.lenient = 0  # > 0 inside ctc_loss, whose lengths CUDA takes on the CPU
        self.unlabelled = False  # a label was needed in backward from a forward-only tracker
        self.allowed = WeakIdKeyDictionary()  # CPU tensors met there (their backward uses them too)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """False: no ``torch._disable_dynamo`` wrapper around ``__torch_dispatch__`` (PyTorch's
        opt-out, see ``TorchDispatchMode._should_skip_dynamo``): it cost ~2 µs of every op's
        ~25 here, and this handler only runs eager ops."""
        return False

    def _plain(self, t) -> bool:
        return (type(t) is torch.Tensor or (isinstance(t, torch.Tensor) and not isinstance(t, Tagged))) \
            and not (t.dim() == 0 and t.device.type == "cpu")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        tagged: list = []
        untagged: list = []
        uargs = _split_args(args, tagged, untagged)
        dev = None
        to_stand_in = False
        if kwargs:
            ukwargs = _split(kwargs, tagged, untagged)
            dev = kwargs.get("device")
            if dev is not None and _is_stand_in(dev):
                to_stand_in = True
                ukwargs["device"] = _CPU
        else:
            ukwargs = {}
        if kwargs and (tagged or to_stand_in) and host_generator_key(kwargs.get("generator")):
            self._host_generator(func, kwargs["generator"])
        if func is _PACK and len(args) > 1 and type(args[1]) is Tagged:  # lengths on the device
            self.host_read("pack_padded_sequence", args[1])
        if untagged:
            if any(t.device.type == STAND_IN for t in untagged):
                raise RuntimeError(f"{func} got a tensor on the meta device without data (made outside "
                                   "devlint's stand-in, e.g. by torch.empty(..., device='meta') before "
                                   "the step)")
            if tagged and func not in CPU_OK:
                self._mixed(func, untagged)
            elif tagged and func in _INDEXED and args and not isinstance(args[0], Tagged):
                self._mixed(func, [args[0]])
        try:
            out = func(*uargs, **ukwargs)
        except (NotImplementedError, RuntimeError) as exc:
            if not tagged:
                raise
            out = _without_cpu_kernel(func, uargs, ukwargs, exc)
        if func is _aten._to_copy.default and dev is not None and not to_stand_in:
            return out  # .cpu() / .to("cpu"): untagged
        if tagged or to_stand_in:
            if type(out) is torch.Tensor:  # most ops: one output
                return _same(tagged, out)
            return self._wrap(func, tagged, out)
        try:
            self._remember(func, untagged, out)
        except Exception:  # bookkeeping must never break the user's step
            pass
        return out

    def _label(self) -> str:
        """The module running now (:func:`module_label`); sets ``unlabelled`` when the
        tracker cannot say (in backward, without its backward hooks)."""
        if not getattr(self.tracker, "backward", True) and self.tracker.is_bw:
            self.unlabelled = True
        return module_label(self.model, self.tracker.parents)

    def _mixed(self, func, untagged) -> None:
        """Record the CPU tensors an op met next to stand-in tensors (see :class:`Mix`)."""
        plain = [t for t in untagged if self._plain(t) and t not in self.allowed]
        if plain and self.lenient:
            for t in plain:
                self.allowed[t] = True
        elif plain:
            module = self._label()
            function = running_function(sys._getframe())
            for t in plain:
                key = self.made.get(t)
                key = ("id", id(t)) if key is None else key
                self.mixes.append(Mix(str(func), module, key, list(t.shape), self.tracker.is_bw, function))

    def host_read(self, op: str, t: torch.Tensor) -> None:
        """Record a device tensor where a GPU takes only a host one (``op``: ``Tensor.numpy``,
        ``pack_padded_sequence``'s lengths): a :class:`Mix` keyed ``("host", op)``."""
        self.mixes.append(Mix(op, self._label(), ("host", op), list(t.shape), self.tracker.is_bw))

    def _host_generator(self, func, gen) -> None:
        """Record a random op on the device driven by a CPU generator: a :class:`Mix` keyed
        ``("generator", name)``, name the dotted attribute of the model holding it, or None."""
        name = next((f"{m}.{a}" if m else a for m, mod in self.model.named_modules()
                     for a, v in vars(mod).items()
                     if isinstance(v, torch._C.Generator) and _same_generator(v, gen)), None)
        self.mixes.append(Mix(str(func), self._label(), ("generator", name), [], self.tracker.is_bw))

    def _wrap(self, func, tagged, out):
        def wrap(t):
            return _same(tagged, t) if type(t) is torch.Tensor else t

        if func in _FIRST_OUTPUT_ONLY and isinstance(out, (tuple, list)):
            return type(out)([wrap(out[0]), *out[1:]])
        return _map(wrap, out)

    def _remember(self, func, tensors, out) -> None:
        """Record where each CPU tensor made during the step comes from (see :class:`Mix`).
        0-dim CPU tensors are no mix themselves (CUDA takes them as scalars) but keep their
        origin too: ``ts[i].expand(n, 1)`` of a plain attribute ``ts`` comes from ``ts``, not
        from ``expand``."""
        origin = next((self.made[t] for t in tensors if t in self.made), None)
        if origin is None:
            leaf = next((t for t in tensors if self._plain(t)), None)
            if leaf is None:  # a 0-dim view of a tensor from before the step
                leaf = next((t for t in tensors if self._untagged(t)), None)
            origin = ("id", id(leaf)) if leaf is not None else (
                "made", str(func), self._label())
        for o in _flat(out, []):
            if self._untagged(o) and o not in self.made:
                self.made[o] = origin

    @staticmethod
    def _untagged(t) -> bool:
        return isinstance(t, torch.Tensor) and not isinstance(t, Tagged)


def to_stand_in(model: torch.nn.Module) -> torch.nn.Module:
    """``model.to("meta")`` under :class:`StandIn`, keeping tied parameters tied.

    ``Module._apply`` gives a tensor subclass new Parameter objects, so a weight shared by two
    modules (an LM head tied to the embedding) would come out as two; this re-ties them.
    When no module has its own ``_apply`` (an RNN's flat weights) and no parameter holds a
    gradient, every parameter and buffer is wrapped where it is instead (the wrapper's data
    is the tensor's own, not a copy; ties kept): what ``model.to`` makes, without its walk
    and copies (~0.5 plain steps of an EfficientNet-like model's stand-in run).
    """
    mods = list(model.modules())
    if all(type(m)._apply is torch.nn.Module._apply for m in mods) and \
            all(p.grad is None for m in mods for p in m._parameters.values() if p is not None) and \
            not any(b.requires_grad for m in mods for b in m._buffers.values() if b is not None):
        done: dict[int, torch.Tensor] = {}
        # below the dispatch mode: no op here is the step's (a detach per tensor, ~25 us each there)
        with torch.no_grad(), torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEY):
            for mod in mods:
                for store, param in ((mod._parameters, True), (mod._buffers, False)):
                    for name, t in store.items():
                        if t is None:
                            continue
                        w = done.get(id(t))
                        if w is None:
                            w = done[id(t)] = _tag(t.detach())
                            if param:  # what nn.Parameter makes of a tensor subclass
                                w.requires_grad_(t.requires_grad)
                                w._is_param = True
                        store[name] = w
        return model
    shared: dict[int, list] = {}
    for mod in mods:
        for name, p in mod._parameters.items():
            if p is not None:
                shared.setdefault(id(p), []).append((mod, name))
    model.to(STAND_IN)
    for places in shared.values():
        if len(places) > 1:
            first = places[0][0]._parameters[places[0][1]]
            for mod, name in places[1:]:
                setattr(mod, name, first)
    return model


def prefer_foreach(optimizer: torch.optim.Optimizer) -> None:
    """Let ``torch.optim.Adam``, ``AdamW`` or ``SGD`` (not Nesterov) whose ``foreach`` is left
    to its default (``None``) use its foreach implementation on the stand-in (``foreach=True``
    per group; not ``fused``, not ``differentiable``; every other optimizer is left alone).
    On the CPU the default is the per-parameter loop, ~10 ops per parameter, each paying the
    stand-in's Python dispatch; the foreach form is a few ops per group, the same
    elementwise arithmetic (bitwise equal on the zoo). Only these classes: their foreach
    form never writes into ``p.grad`` (SGD's Nesterov form adds the momentum into the
    gradients in place, and the reference reads them after the step), and nothing in them
    mixes devices."""
    if type(optimizer) not in (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD):
        return
    for group in optimizer.param_groups:
        if group.get("foreach", False) is None and not group.get("fused") \
                and not group.get("differentiable") and not group.get("nesterov"):
            group["foreach"] = True


_NO_KERNEL = re.compile(r"not implemented for '(\w+)'")
_NAMES = {"Int": torch.int32, "Long": torch.int64, "Short": torch.int16, "Char": torch.int8,
          "Byte": torch.uint8, "Half": torch.float16, "BFloat16": torch.bfloat16, "Bool": torch.bool}


def _without_cpu_kernel(func, args, kwargs, exc):
    """Rerun an op that has a GPU kernel but no CPU kernel for a dtype (code that takes a
    GPU-only branch on the stand-in, e.g. ``torch.histc`` of int tensors in MoE routing):
    inputs of that dtype are computed in float64 and the outputs cast back."""
    found = _NO_KERNEL.search(str(exc))
    dtype = _NAMES.get(found.group(1)) if found else None
    if dtype is None:
        raise exc
    up = _map(lambda t: t.double() if t.dtype == dtype else t, (args, kwargs))
    out = func(*up[0], **up[1])
    return _map(lambda t: t.to(dtype) if t.dtype == torch.float64 else t, out)


def _torch_caller(frame) -> str:
    """``" (called by Beta.__init__ in torch.distributions.beta)"`` when ``frame``, the caller
    of a factory, is torch's own code: the torch function the step called, which the step's
    author can find in their code (``torch.distributions.Beta(0.4, 0.4)`` makes its parameters
    with ``torch.tensor``); ``""`` when the step called the factory itself."""
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("devlint.runtime"):
        frame = frame.f_back  # devlint's own wrappers of the factory (cuda_branch)
    if frame is None or not str(frame.f_globals.get("__name__", "")).startswith("torch."):
        return ""
    entry = frame
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("torch."):
        entry, frame = frame, frame.f_back
    return f" (called by {entry.f_code.co_qualname} in {entry.f_globals['__name__']})"


def _tensor_factory(orig, name: str, mode=None):
    """``torch.<name>`` (``tensor``, ``as_tensor``, ``asarray``, ``from_numpy``) on the stand-in:
    ``device="meta"`` makes a tagged tensor; a CPU tensor made from data while ``mode`` runs the
    step is recorded as made by ``torch.<name>`` in the module running (a 1-d
    ``torch.tensor([...])`` in a forward is a factory without ``device=``, not an unmoved global)."""
    def make(data, *args, device=None, **kwargs):
        if _is_stand_in(device):
            return Tagged(orig(data, *args, device="cpu", **kwargs))
        out = orig(data, *args, **kwargs) if name == "from_numpy" else orig(data, *args, device=device, **kwargs)
        if mode is not None and type(out) is torch.Tensor and out.device.type == "cpu" \
                and not isinstance(data, torch.Tensor):  # (lift_fresh recorded its own input)
            mode.made[out] = ("made", f"torch.{name}{_torch_caller(sys._getframe(1))}", mode._label())
        return out

    return make


@contextlib.contextmanager
def stand_in(model: torch.nn.Module, backward_labels: bool = True):
    """Run the block on the stand-in device, yielding ``(mode, tracker)``: ``torch.tensor`` /
    ``as_tensor`` / ``asarray`` with ``device="meta"`` make tagged tensors, ``torch.autocast(
    device_type="meta")`` is the CPU's, CUDA branches are taken (:mod:`.cuda_branch`); all
    restored on exit. ``backward_labels``: the tracker attributes backward ops to modules too
    (else ``mode.unlabelled`` says when that was needed, see :class:`Tracker`)."""
    import torch.nn.functional as F

    tracker = Tracker(backward_labels)
    mode = StandIn(tracker, model)
    saved = {n: getattr(torch, n) for n in ("tensor", "as_tensor", "asarray", "from_numpy")}
    autocast_init = torch.amp.autocast_mode.autocast.__init__
    ctc = (torch.ctc_loss, F.ctc_loss)

    def init(self, device_type, *args, **kwargs):
        autocast_init(self, "cpu" if device_type == STAND_IN else device_type, *args, **kwargs)

    def lenient(f):
        def call(*args, **kwargs):
            mode.lenient += 1
            try:
                return f(*args, **kwargs)
            finally:
                mode.lenient -= 1
        return call

    generator = torch.Generator
    try:
        for n, f in saved.items():
            setattr(torch, n, _tensor_factory(f, n, mode))
        torch.amp.autocast_mode.autocast.__init__ = init
        torch.ctc_loss, F.ctc_loss = lenient(ctc[0]), lenient(ctc[1])
        torch.Generator = StandInGenerator
        _ACTIVE.append(mode)
        with tracker, mode, cuda_branch(Tagged, STAND_IN):
            yield mode, tracker
    finally:
        if mode in _ACTIVE:
            _ACTIVE.remove(mode)
        torch.Generator = generator
        _GENERATORS.clear()
        for n, f in saved.items():
            setattr(torch, n, f)
        torch.amp.autocast_mode.autocast.__init__ = autocast_init
        torch.ctc_loss, F.ctc_loss = ctc
