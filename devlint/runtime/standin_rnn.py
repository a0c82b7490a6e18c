"""Recurrent layers on the stand-in device as one op, not hundreds.

``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` call ``torch._VF.lstm`` (``gru``, ``rnn_tanh``,
``rnn_relu``), an op whose CPU kernel runs the whole sequence (oneDNN or a fused loop) only
for tensors on the CPU. On the stand-in's ``meta``-tagged tensors it decomposes into its
per-time-step ops, each paying the stand-in's Python dispatch: a 2-layer LSTM over 12 steps was
~1,700 dispatched ops, 6-7 plain steps of the zoo's LSTM language model for the stand-in run
alone. While the stand-in runs, :func:`recurrent_layers` puts :func:`_one_op` in front of those
four ``_VF`` functions: the tensors' placement is checked as the stand-in checks any op (a CPU
initial state next to tagged inputs is a :class:`devlint.runtime.standin.Mix`; the
packed-sequence ``batch_sizes`` are on the CPU on CUDA too), then the layer runs once on the
wrapped CPU tensors under :class:`_OnElems`, whose backward is the CPU kernel's own backward
(``torch.autograd.grad`` of the inner graph). The numbers are those of a plain CPU run of the
layer (the reference's other runs take the same kernel).
"""

from __future__ import annotations

import contextlib

import torch

from . import standin

__all__ = ["recurrent_layers"]

#: The ``_VF`` functions ``torch.nn.modules.rnn`` calls for whole sequences.
_NAMES = ("lstm", "gru", "rnn_tanh", "rnn_relu")
_PYTHON = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | \
    torch._C.DispatchKeySet(torch._C.DispatchKey.PythonTLSSnapshot)


class _OnElems(torch.autograd.Function):
    """``fn(*args)`` computed on the CPU tensors inside :class:`standin.Tagged` wrappers, below
    the stand-in's dispatch mode, with its outputs tagged; the backward differentiates that
    inner computation. ``tensors`` are the tensors of ``args`` (their slots in ``rebuild``)."""

    @staticmethod
    def forward(ctx, fn, rebuild, *tensors):
        inner = [(t.elem if type(t) is standin.Tagged else t).detach().requires_grad_(t.requires_grad)
                 for t in tensors]
        with torch.enable_grad(), torch._C._ExcludeDispatchKeyGuard(_PYTHON):
            out = fn(*rebuild(inner))
        ctx.inner, ctx.out = inner, out
        return tuple(standin.Tagged(o.detach()) for o in out)

    @staticmethod
    def backward(ctx, *grads):
        pairs = [(o, g) for o, g in zip(ctx.out, grads) if g is not None and o.requires_grad]
        wanted = [t for t in ctx.inner if t.requires_grad]
        with torch._C._ExcludeDispatchKeyGuard(_PYTHON):
            found = torch.autograd.grad([o for o, _ in pairs],
                                        wanted, [standin._elem(g) for _, g in pairs], allow_unused=True) \
                if pairs and wanted else [None] * len(wanted)
        it = iter(found)
        out = [None, None]
        for t in ctx.inner:
            g = next(it) if t.requires_grad else None
            out.append(None if g is None else standin.Tagged(g))
        ctx.inner = ctx.out = None
        return tuple(out)


def _batch_sizes_at(name: str, args: tuple) -> int | None:
    """The position of the packed sequence's ``batch_sizes`` in ``args`` (a CPU tensor on CUDA
    too), or None for the padded form: ``lstm(data, batch_sizes, hx: list, params: list, ...)``
    against ``lstm(input, hx: list, params: list, ...)``; ``gru``/``rnn_*(data, batch_sizes, hx,
    params: list, ...)`` against ``(input, hx, params: list, ...)``."""
    if len(args) > 3 and isinstance(args[1], torch.Tensor):
        if name == "lstm" or (isinstance(args[2], torch.Tensor) and isinstance(args[3], (list, tuple))):
            return 1
    return None


def _one_op(name: str, orig):
    overloads = getattr(torch.ops.aten, name)

    def call(*args, **kwargs):
        mode = standin._ACTIVE[-1] if standin._ACTIVE else None
        flat = standin._flat(args, [])
        if mode is None or kwargs or not any(type(t) is standin.Tagged for t in flat) \
                or any(t.layout != torch.strided for t in flat):
            return orig(*args, **kwargs)
        skip = _batch_sizes_at(name, args)
        op = overloads.data if skip is not None else overloads.input
        plain = [t for i, a in enumerate(args) if i != skip for t in standin._flat(a, [])
                 if type(t) is not standin.Tagged]
        mode.ops += 1
        if plain:
            mode._mixed(op, plain)
        slots: list = []

        def shape(a):  # the arguments with each tensor replaced by its slot number
            if isinstance(a, torch.Tensor):
                slots.append(a)
                return _Slot(len(slots) - 1)
            if isinstance(a, (list, tuple)):
                return type(a)(shape(v) for v in a)
            return a

        spec = shape(args)

        def rebuild(tensors):
            def fill(a):
                if isinstance(a, _Slot):
                    return tensors[a.i]
                if isinstance(a, (list, tuple)):
                    return type(a)(fill(v) for v in a)
                return a
            return fill(spec)

        out = _OnElems.apply(orig, rebuild, *slots)
        return out
    return call


class _Slot:
    __slots__ = ("i",)

    def __init__(self, i: int):
        self.i = i


@contextlib.contextmanager
def recurrent_layers():
    """While active, ``torch._VF.lstm`` / ``gru`` / ``rnn_tanh`` / ``rnn_relu`` on tagged tensors
    run as one op (see the module docstring); restored on exit."""
    vf = torch._VF
    saved = {n: vf.__dict__.get(n) for n in _NAMES}
    try:
        for n in _NAMES:
            setattr(vf, n, _one_op(n, getattr(torch._C._VariableFunctions, n)))
        yield
    finally:
        for n, f in saved.items():
            if f is None:
                vf.__dict__.pop(n, None)
            else:
                setattr(vf, n, f)
