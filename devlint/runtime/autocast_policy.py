"""CUDA autocast's casting rules applied to CPU tensors, so a CPU run speaks for a CUDA GPU.

``torch.autocast("cpu")`` and ``torch.autocast("cuda")`` cast different ops. CPU autocast
lets ``exp``, ``pow``, ``softmax``, ``log_softmax``, ``layer_norm``, ``sum``, ``cumsum``,
``rsqrt`` ... run in bfloat16/float16 (its dispatch key has no kernel for them:
``torch._C._dispatch_dump_table("aten::exp")`` shows ``AutocastCPU: fallthrough``), where CUDA
autocast runs them in float32; CUDA autocast casts ``mv``, ``addmv``, ``addr``, the RNN cells
and ``chain_matmul`` to the low precision, CPU autocast does not; CPU autocast casts ``cat``,
``stack``, pooling and ``linalg`` ops that CUDA autocast leaves alone. A check that follows the
CPU's rules flags a softmax written as ``exp(s) / exp(s).sum()`` that trains fine on a GPU,
raises "addmv input tensors must have the same dtype" on ``torch.mv`` of an autocast output,
and never sees the float16 overflow ``mv`` really has on a GPU.

:func:`policy` (a context manager) makes CPU autocast follow CUDA's rules while it is active:
every op that has an ``AutocastCUDA`` kernel in the installed torch gets an ``AutocastCPU``
kernel (``torch.library.Library("aten", "IMPL")``) that casts its CPU floating-point
arguments as CUDA autocast casts CUDA ones, and every op that has only an ``AutocastCPU``
kernel gets a fallthrough (autocast leaves it alone, as on CUDA). The kernels run only inside
``torch.autocast("cpu", ...)`` (the key is off elsewhere) and Python runs only for the listed
ops (on the zoo ~1 op in 5), not in front of every op; PyTorch's CPU autocast is untouched
outside :func:`policy`. Registering ~215 kernels costs ~3-4 ms (the dispatcher rebuilds each
op's table), 1-2 plain steps of a small model, so where no out-of-tree backend uses
``PrivateUse1`` they are registered once per process at the unused ``AutocastPrivateUse1``
key, which :func:`policy` switches on exactly while CPU autocast is on (:func:`_mirrored`),
and whose kernels then stand in front of ``AutocastCPU`` (they exclude it: a rule replaces
CPU's kernel, an op CPU autocast alone casts is run as if it had none). Outside
:func:`policy` that key is off and nothing calls them. Elsewhere the kernels are registered
at ``AutocastCPU`` per :func:`policy` and the library removed on exit, which restores
PyTorch's CPU autocast. Which rule each op follows is :data:`CUDA_RULES`, one entry
per op, each citing its source; the ops are the dispatcher's own list
(:func:`dispatcher_ops`), and ``tests/test_runtime_autocast_policy.py`` asserts the two are the
same set for the pinned torch.

The rules (ATen's ``CastPolicy``, restated): ``lower`` casts every floating-point tensor
argument that is not float64 to autocast's dtype; ``fp32`` casts them to float32;
``fp32_dtype`` passes ``dtype=torch.float32`` when the caller gave no ``dtype`` and the first
argument is a floating-point tensor that is not float64; ``fp32_append`` calls the overload
that takes a ``dtype`` (``norm``) with float32; ``promote`` casts them to the widest
floating-point type among them (float32 wins over the low precision, float64 is ignored);
``banned`` raises, as CUDA autocast does for ``binary_cross_entropy``. CUDA's cast cache for
weights is not modelled: it changes memory and speed, not values.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import warnings

import torch

__all__ = ["POLICIES", "CUDA_RULES", "CUDNN_RNN", "CONVOLUTIONS", "SOURCES", "dispatcher_ops", "policy", "current",
           "float32_convolutions", "BannedUnderAutocast"]

#: The values of ``check_step(autocast_policy=...)``: ``"cuda"`` applies CUDA autocast's rules
#: to the CPU low-precision runs (they stand in for a GPU), ``"cpu"`` leaves CPU autocast's own
#: rules (for training with CPU autocast, bfloat16 on a Xeon).
POLICIES = ("cuda", "cpu")

_VERSION = "torch 2.13"
#: Where each rule of :data:`CUDA_RULES` comes from. The AMP docs are PyTorch's "Automatic
#: Mixed Precision package - torch.amp" page, "Autocast Op Reference", for the version named;
#: the header is ``ATen/autocast_mode.h`` as installed by that wheel (its ``AT_FORALL_*``
#: lists), for ops the docs do not name.
SOURCES = {
    "docs-f16": f"AMP docs ({_VERSION}), 'CUDA Ops that can autocast to float16'",
    "docs-f32": f"AMP docs ({_VERSION}), 'CUDA Ops that can autocast to float32'",
    "docs-promote": f"AMP docs ({_VERSION}), 'CUDA Ops that promote to the widest input type'",
    "docs-bce": f"AMP docs ({_VERSION}), 'Prefer binary_cross_entropy_with_logits over "
                "binary_cross_entropy'",
    "h-lower": f"ATen/autocast_mode.h ({_VERSION}), AT_FORALL_LOWER_PRECISION_FP",
    "h-fp32": f"ATen/autocast_mode.h ({_VERSION}), AT_FORALL_FP32",
    "h-dtype": f"ATen/autocast_mode.h ({_VERSION}), AT_FORALL_FP32_SET_OPT_DTYPE",
    "h-append": f"ATen/autocast_mode.h ({_VERSION}), AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE",
    "h-promote": f"ATen/autocast_mode.h ({_VERSION}), AT_FORALL_PROMOTE",
    "cudnn": f"{_VERSION} dispatcher: AutocastCUDA kernel, cuDNN-only op (no CPU kernel)",
    "cudnn-rnn": f"ATen/cudnn/AutocastRNN.cpp and native/cudnn/RNN.cpp ({_VERSION}, CUDA builds): "
                 "_cudnn_rnn's Autocast kernel, promote_rnn_math_type",
}


def _rules(rule: str, source: str, entries: str) -> dict:
    """``"op[=doc name]"`` words -> {``"aten::op"``: (rule, doc name or None, source key)};
    a doc name is the name the AMP docs list the op under."""
    out = {}
    for word in entries.split():
        op, _, doc = word.partition("=")
        out[f"aten::{op}"] = (rule, doc or None, source if doc else _HEADER[rule])
    return out


_HEADER = {"lower": "h-lower", "fp32": "h-fp32", "fp32_dtype": "h-dtype", "fp32_append": "h-append",
           "promote": "h-promote", "banned": "docs-bce"}

#: aten op (with overload) -> (rule, the AMP docs' name for it or None, key of :data:`SOURCES`),
#: for CUDA autocast in torch 2.13.
CUDA_RULES: dict[str, tuple[str, str | None, str]] = {
    **_rules("lower", "docs-f16", """
        _convolution _convolution.deprecated conv1d=conv1d conv2d=conv2d conv3d=conv3d conv_tbc
        conv_transpose1d=conv_transpose1d conv_transpose2d.input=conv_transpose2d
        conv_transpose3d.input=conv_transpose3d convolution prelu=prelu addmm=addmm addmv=addmv
        addr=addr matmul=matmul einsum mm=mm mv=mv linalg_vecdot linear=linear addbmm=addbmm
        baddbmm=baddbmm bmm=bmm chain_matmul=chain_matmul linalg_multi_dot=multi_dot
        _thnn_fused_lstm_cell=LSTMCell _thnn_fused_gru_cell=GRUCell lstm_cell=LSTMCell
        gru_cell=GRUCell rnn_tanh_cell=RNNCell rnn_relu_cell=RNNCell
        _scaled_dot_product_flash_attention scaled_dot_product_attention"""),
    **_rules("fp32", "docs-f32", """
        acos=acos asin=asin cosh=cosh erfinv=erfinv exp=exp expm1=expm1 log=log log10=log10
        log2=log2 log1p=log1p reciprocal=reciprocal rsqrt=rsqrt sinh=sinh tan=tan
        pow.Tensor_Scalar=pow pow.Tensor_Tensor=pow pow.Scalar=__rpow__ softplus=softplus
        layer_norm=layer_norm native_layer_norm=layer_norm rms_norm group_norm=group_norm
        frobenius_norm.dim=norm nuclear_norm=norm nuclear_norm.dim=norm
        cosine_similarity=cosine_similarity poisson_nll_loss=poisson_nll_loss
        cosine_embedding_loss=cosine_embedding_loss nll_loss=nll_loss nll_loss2d=nll_loss
        hinge_embedding_loss=hinge_embedding_loss kl_div=kl_div l1_loss=l1_loss
        smooth_l1_loss=smooth_l1_loss huber_loss mse_loss=mse_loss
        margin_ranking_loss=margin_ranking_loss multilabel_margin_loss=multilabel_margin_loss
        soft_margin_loss=soft_margin_loss triplet_margin_loss=triplet_margin_loss
        multi_margin_loss=multi_margin_loss
        binary_cross_entropy_with_logits=binary_cross_entropy_with_logits dist=dist pdist=pdist
        cdist=cdist renorm=renorm logsumexp upsample_nearest1d _upsample_nearest_exact1d
        upsample_nearest2d _upsample_nearest_exact2d upsample_nearest3d _upsample_nearest_exact3d
        upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa upsample_trilinear3d
        upsample_bicubic2d _upsample_bicubic2d_aa"""),
    **_rules("fp32_dtype", "docs-f32", """
        prod=prod prod.dim_int=prod softmax.int=softmax log_softmax.int=log_softmax
        cumprod=cumprod cumsum=cumsum linalg_vector_norm=norm linalg_matrix_norm=norm
        linalg_matrix_norm.str_ord=norm sum=sum sum.dim_IntList=sum"""),
    **_rules("fp32_append", "docs-f32", "norm.Scalar=norm norm.ScalarOpt_dim=norm"),
    **_rules("promote", "docs-promote", """
        addcdiv=addcdiv addcmul=addcmul atan2=atan2 bilinear=bilinear cross=cross dot=dot vdot
        grid_sampler=grid_sample index_put=index_put tensordot=tensordot scatter_add=scatter_add"""),
    **_rules("banned", "docs-bce", "binary_cross_entropy=binary_cross_entropy"),
    "aten::cudnn_convolution": ("lower", None, "cudnn"),
    "aten::cudnn_convolution_transpose": ("lower", None, "cudnn"),
}

#: The recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``): on a GPU they run cuDNN's
#: ``_cudnn_rnn``, whose autocast kernel is compiled only into CUDA builds (so no CPU build's
#: dispatcher lists it): it casts the input, hidden state and weights to autocast's dtype, and
#: cuDNN computes with them in float32 (``promote_rnn_math_type``: half data, float math),
#: its outputs in that dtype. Rule ``rnn``: the floating-point arguments rounded to the low
#: dtype (an input past 65504 is inf, as on the GPU), the layer computed in float32 from those
#: values, its outputs rounded once to the low dtype. Source key ``cudnn-rnn``.
CUDNN_RNN: dict[str, tuple[str, str | None, str]] = {
    f"aten::{op}.{ov}": ("rnn", None, "cudnn-rnn")
    for op in ("lstm", "gru", "rnn_tanh", "rnn_relu") for ov in ("input", "data")}

#: ``norm`` overloads without a dtype -> the overload CUDA autocast calls with float32.
_APPEND = {"aten::norm.Scalar": "ScalarOpt_dtype", "aten::norm.ScalarOpt_dim": "ScalarOpt_dim_dtype"}
_PU1 = torch._C.DispatchKey.AutocastPrivateUse1
_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU) | torch._C.DispatchKeySet(_PU1)


class BannedUnderAutocast(RuntimeError):
    """An op CUDA autocast refuses to run (``binary_cross_entropy``, ``nn.BCELoss``): on a GPU
    the step raises here."""


_ACTIVE: contextvars.ContextVar[str] = contextvars.ContextVar("devlint_autocast_policy", default="cpu")
_WIDE_CONV: contextvars.ContextVar[bool] = contextvars.ContextVar("devlint_float32_convolutions", default=False)
#: The convolutions of the ``lower`` rule, which :func:`float32_convolutions` computes in float32.
CONVOLUTIONS = frozenset(n for n, (rule, *_) in CUDA_RULES.items()
                         if rule == "lower" and ("conv" in n and "linalg" not in n))


#: The last output a rule computed in float32 and is about to round to the low dtype
#: (:func:`widened`): ``(op name, weak references to its tensors)``.
_WIDENED: contextvars.ContextVar[tuple] = contextvars.ContextVar("devlint_widened", default=("", ()))


def widened(t) -> str | None:
    """The op (``"aten::conv1d"``) whose float32 result ``t`` is, when ``t`` is what a rule
    computed in float32 in place of a low-precision kernel (a convolution under
    :func:`float32_convolutions`, an RNN cell) and now rounds to the low dtype: on a GPU that
    op itself outputs the low dtype, so an overflow at the rounding is that op's. None for
    any other tensor."""
    name, refs = _WIDENED.get()
    return name.replace("::", ".") if any(r() is t for r in refs) else None


def _widened(name: str, out):
    import weakref

    tensors = out if isinstance(out, tuple) else (out,)
    _WIDENED.set((name, tuple(weakref.ref(t) for t in tensors if isinstance(t, torch.Tensor))))
    return out


def current() -> str:
    """The rules CPU autocast follows now: ``"cuda"`` inside :func:`policy` ``("cuda")``, else
    ``"cpu"``."""
    return _ACTIVE.get()


@functools.cache
def dispatcher_ops(key: str = "AutocastCUDA") -> frozenset[str]:
    """The aten ops (``"aten::name.overload"``) that have a kernel (not a fallthrough) for the
    dispatch key ``key`` in the installed torch: what autocast on that device casts (read
    once per process, before :func:`policy` registers anything)."""
    return frozenset(n for n in torch._C._dispatch_get_all_op_names()
            if n.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(n, key))


def _overload(name: str):
    base, _, ov = name[len("aten::"):].partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


def _eligible(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


def _cast(obj, dtype):
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if _eligible(obj) and obj.dtype != dtype else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast(v, dtype) for v in obj)
    return obj


def _widest(obj, current):
    if isinstance(obj, torch.Tensor):
        if not _eligible(obj):
            return current
        if current == torch.float32 or obj.dtype == torch.float32:
            return torch.float32
        if obj.dtype != current:
            raise RuntimeError(f"Unexpected floating ScalarType {obj.dtype} in autocast's promote "
                               f"(autocast dtype {current})")
        return current
    if isinstance(obj, (list, tuple)):
        for v in obj:
            current = _widest(v, current)
    return current


def _with_defaults(op, args, kwargs) -> tuple:
    """``args`` and ``kwargs`` of a call to ``op`` as a full positional list, each argument
    left out taking its schema default. The ``dtype`` overload that ``fp32_append`` calls has
    no defaults (``norm.ScalarOpt_dim_dtype`` needs ``keepdim``), and a call from C++ reaches
    a Python kernel with its trailing defaults dropped: ``F.pairwise_distance`` calls
    ``at::norm(x, p, dim, keepdim=False)`` and the kernel sees no ``keepdim``. CUDA autocast's
    own kernel passes every argument on (``ATen/autocast_mode.cpp``, ``DIFFERENT_REDISPATCH``)."""
    full = list(args)
    for a in op._schema.arguments[len(args):]:
        if a.kwarg_only:
            break
        full.append(kwargs[a.name] if a.name in kwargs else a.default_value)
    return tuple(full)


@functools.cache
def _kernel(name: str, rule: str):
    """The autocast kernel applying ``rule`` to the op ``name`` (see the module docstring);
    made once per process."""
    op = _overload(name)
    if rule == "fp32_append":
        typed = getattr(torch.ops.aten.norm, _APPEND[name])
    dtype_at = next((i for i, a in enumerate(op._schema.arguments)
                     if a.name == "dtype" and not a.kwarg_only), None)
    conv = name in CONVOLUTIONS

    def kernel(*args, **kwargs):
        low = torch.get_autocast_dtype("cpu")
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            if rule == "rnn":  # rounded to the low dtype, computed in float32, rounded once
                wide = _widened(name, op(*_cast(_cast(args, low), torch.float32),
                                         **_cast(_cast(kwargs, low), torch.float32)))
                return tuple(t.to(low) if _eligible(t) else t for t in wide)
            if rule == "lower":
                if conv and _WIDE_CONV.get():
                    wide = _widened(name, op(*_cast(_cast(args, low), torch.float32),
                                             **_cast(_cast(kwargs, low), torch.float32)))
                    return wide.to(low) if wide.dtype == torch.float32 else wide
                return op(*_cast(args, low), **_cast(kwargs, low))
            if rule == "fp32":
                return op(*_cast(args, torch.float32), **_cast(kwargs, torch.float32))
            if rule == "promote":
                to = _widest(tuple(kwargs.values()), _widest(args, low))
                return op(*_cast(args, to), **_cast(kwargs, to))
            if rule == "fp32_dtype":
                if _eligible(args[0]):
                    if dtype_at is not None and len(args) > dtype_at:
                        if args[dtype_at] is None:
                            args = (*args[:dtype_at], torch.float32, *args[dtype_at + 1:])
                    elif kwargs.get("dtype") is None:
                        kwargs = {**kwargs, "dtype": torch.float32}
                return op(*args, **kwargs)
            if rule == "fp32_append":
                out = torch.float32 if _eligible(args[0]) else args[0].dtype
                return typed(*_with_defaults(op, args, kwargs), dtype=out)
            raise BannedUnderAutocast(
                "binary_cross_entropy (nn.BCELoss) is unsafe under CUDA autocast, which raises "
                "here on a GPU; use binary_cross_entropy_with_logits (nn.BCEWithLogitsLoss)")
    return kernel


@contextlib.contextmanager
def float32_convolutions():
    """While active (and :func:`policy` ``("cuda")`` is), an op of :data:`CONVOLUTIONS` that
    autocast casts to its low precision gets its floating-point arguments rounded to that
    dtype, as CUDA autocast casts them, and is then computed in float32 from those values,
    its output rounded once to the low dtype: the float32 arithmetic of a GPU's convolution
    kernels on the same operands. PyTorch's CUDA depthwise kernel (the convolution of a
    depthwise ``groups == channels`` layer) sums in ``at::acc_type<scalar_t, true>``, which is
    float for Half and BFloat16 (``aten/src/ATen/native/cuda/DepthwiseConv2d.cu``), and cuDNN
    convolutions of half data compute in float (``aten/src/ATen/cudnn/Descriptors.h`` sets
    the math type of a ``CUDNN_DATA_HALF`` convolution to ``CUDNN_DATA_FLOAT``), so the
    output differs from a GPU's only by the float32 summation order (~sqrt(n) * 2**-24
    relative, far below one rounding to float16, 2**-11). Autograd differentiates the
    float32 op and the casts around it, so the backward computes in float32 and rounds each
    gradient once to the low dtype at the cast, as the GPU's backward kernels do. Used by
    :func:`devlint.runtime.emulate.cpu_kernels` instead of a dispatch mode: Python runs once
    per convolution, not in front of every op, and a depthwise convolution takes float32's
    fast CPU kernel instead of the low-precision ``_slow_conv2d`` path."""
    token = _WIDE_CONV.set(True)
    try:
        yield
    finally:
        _WIDE_CONV.reset(token)


@contextlib.contextmanager
def policy(name: str = "cuda"):
    """While active, ``torch.autocast("cpu", dtype=...)`` casts as ``torch.autocast("cuda")``
    would (``name="cuda"``, :data:`CUDA_RULES` on every op the dispatcher lists for
    ``AutocastCUDA``; the others with a CPU autocast kernel fall through), or as PyTorch's CPU
    autocast (``name="cpu"``: nothing changes). Yields the set of ops given CUDA's rules. Ops
    listed for ``AutocastCUDA`` in an installed torch other than 2.13 but missing from
    :data:`CUDA_RULES` keep CPU autocast's behaviour.

    Raises:
        ValueError: ``name`` is not one of :data:`POLICIES`.
    """
    if name not in POLICIES:
        raise ValueError(f"unknown autocast policy {name!r}; use one of {', '.join(POLICIES)}")
    if name == "cpu":
        yield set()
        return
    cuda, cpu = dispatcher_ops("AutocastCUDA"), dispatcher_ops("AutocastCPU")
    handled = {n for n in cuda if n in CUDA_RULES}
    kept = _kept(handled, cpu - cuda)
    token = _ACTIVE.set("cuda")
    try:
        with _mirrored() if kept else _registered(handled, cpu - cuda, "AutocastCPU"):
            yield handled
    finally:
        _ACTIVE.reset(token)


def _register(lib, handled, skipped, key: str) -> None:
    """CUDA's rule kernels for ``handled`` and the recurrent layers, and kernels that run
    ``skipped`` as if CPU autocast had none (a fallthrough), registered in ``lib`` at ``key``
    (``AutocastCPU``, or ``AutocastPrivateUse1`` through :func:`_in_front`)."""
    with warnings.catch_warnings():  # "overriding a previously registered kernel": meant
        warnings.simplefilter("ignore")
        cpu = key == "AutocastCPU"
        for n, rule in [*((n, CUDA_RULES[n][0]) for n in sorted(handled)), *((n, "rnn") for n in sorted(CUDNN_RNN)),
                        *((n, None) for n in sorted(skipped))]:
            if cpu:
                lib.impl(n[len("aten::"):], _kernel(n, rule) if rule else torch.library.fallthrough_kernel, key)
            else:
                lib.impl(n[len("aten::"):], _in_front(n, rule), key, with_keyset=True)


#: The dispatch keys after ``AutocastCPU`` and after ``AutocastPrivateUse1``.
_BELOW_CPU = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.AutocastCPU)
_BELOW_PU1 = torch._C._dispatch_keyset_full_after(_PU1)


@functools.cache
def _in_front(name: str, rule: str | None):
    """The kernel at ``AutocastPrivateUse1`` for the op ``name``: where a tensor argument's
    dispatch keys hold ``AutocastCPU`` (CPU autocast would see it: a CPU tensor; not the
    stand-in's ``meta``-tagged ones, which CPU autocast leaves alone; the key set the
    dispatcher hands the kernel leaves out the op's fallthrough keys), ``rule``'s kernel
    (:func:`_kernel`), or, for an op that only CPU autocast casts (``rule`` None), dispatch
    going on below ``AutocastCPU`` as a fallthrough there would, nothing excluded for the
    ops it calls (``log_softmax`` and ``nll_loss`` in ``cross_entropy`` still get CUDA's
    rules); elsewhere dispatch goes on as if this key were not there."""
    op = _overload(name)
    inner = _kernel(name, rule) if rule else None
    cpu = torch._C.DispatchKey.AutocastCPU

    def kernel(keyset, *args, **kwargs):
        if not (_cpu_autocast_sees(args, cpu) or (kwargs and _cpu_autocast_sees(kwargs.values(), cpu))):
            return op.redispatch(keyset & _BELOW_PU1, *args, **kwargs)
        if inner is None:
            return op.redispatch(keyset & _BELOW_CPU, *args, **kwargs)
        return inner(*args, **kwargs)
    return kernel


def _cpu_autocast_sees(args, key) -> bool:
    """Whether a tensor among ``args`` (or in a list or tuple there) has the dispatch key ``key``."""
    for a in args:
        if isinstance(a, torch.Tensor):
            if torch._C._dispatch_keys(a).has(key):
                return True
        elif isinstance(a, (list, tuple)) and _cpu_autocast_sees(a, key):
            return True
    return False


@contextlib.contextmanager
def _registered(handled, skipped, key: str):
    """The kernels of :func:`_register` at ``key`` while active (removed on exit)."""
    lib = torch.library.Library("aten", "IMPL")
    try:
        _register(lib, handled, skipped, key)
        yield
    finally:
        lib._destroy()


#: The library holding the kernels at ``AutocastPrivateUse1`` (made once per process by :func:`_kept`).
_KEPT: list = []


def _kept(handled, skipped) -> bool:
    """Whether the kernels are registered at ``AutocastPrivateUse1`` (registering them, and a
    fallthrough fallback for that key, the first time): only when no backend has claimed
    ``PrivateUse1`` (its name is still ``privateuseone``) and no op has another kernel at that
    key. A ``PrivateUse1`` backend imported later in the same process cannot register its
    own autocast fallback (the dispatcher allows one per key): import it first."""
    if _KEPT:
        return _KEPT[0] is not None
    free = torch._C._get_privateuse1_backend_name() == "privateuseone" and \
        not dispatcher_ops("AutocastPrivateUse1")
    lib = None
    if free:
        lib = torch.library.Library("aten", "IMPL")
        fallback = torch.library.Library("_", "IMPL")
        try:
            _register(lib, handled, skipped, "AutocastPrivateUse1")
            # ops without a kernel there fall through (a fallback is ~7 ms to add or remove: kept)
            fallback.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
            lib = (lib, fallback)
        except RuntimeError:  # a fallback already there (a torch build that adds one): per check
            lib._destroy()
            fallback._destroy()
            lib, free = None, False
    _KEPT.append(lib)
    return free


def _follow_cpu() -> None:
    """Switch ``AutocastPrivateUse1`` on in this thread exactly when CPU autocast is on."""
    on = not torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.AutocastCPU)
    torch._C._dispatch_tls_set_dispatch_key_included(_PU1, on)
    torch._C._dispatch_tls_set_dispatch_key_excluded(_PU1, not on)


@contextlib.contextmanager
def _mirrored():
    """While active, the ``AutocastPrivateUse1`` key follows CPU autocast: on whenever
    ``torch.set_autocast_enabled`` (what ``torch.autocast`` enters and exits with) leaves
    CPU autocast on. On exit the key's state and ``torch.set_autocast_enabled`` are restored."""
    real = torch.set_autocast_enabled
    was = (torch._C._dispatch_tls_is_dispatch_key_included(_PU1),
           torch._C._dispatch_tls_is_dispatch_key_excluded(_PU1))

    def set_enabled(*args, **kwargs):
        real(*args, **kwargs)
        _follow_cpu()

    try:
        torch.set_autocast_enabled = set_enabled
        _follow_cpu()
        yield
    finally:
        torch.set_autocast_enabled = real
        torch._C._dispatch_tls_set_dispatch_key_included(_PU1, was[0])
        torch._C._dispatch_tls_set_dispatch_key_excluded(_PU1, was[1])
