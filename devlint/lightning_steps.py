"""DEV111 in a Lightning ``LightningModule``: a tensor the step builds on the CPU fed to the module.

Lightning moves the module and the batches it hands to the steps, so the dataflow leaves the
methods of a ``LightningModule`` silent (:attr:`devlint.flow_frames.ClassInfo.silent`). What
Lightning does not move is a tensor the step makes itself: ``torch.zeros(n, hidden)`` as an
LSTM's initial state, ``torch.randn(16, latent)`` as a sampling batch. Fed to ``self(...)``
(the module, on the accelerator while it trains) it is the same-device error DEV111 names.

Read only in the methods Lightning calls once the module is placed (:func:`placed_hook`), and only
for the module itself (``self(...)``, ``self.forward(...)``, a ``forward`` that moves nothing) or a
``torch.nn`` layer with weights held on ``self`` (``self.lstm(...)``); a batch item is never
taken for a CPU tensor here (Lightning placed it).
"""

from __future__ import annotations

import re

import libcst as cst

from .flow_kinds import CPU, CPUB

#: the hooks Lightning calls on a placed module: the steps (and helpers named like them,
#: ``shared_step``) and the per-batch and per-epoch hooks (``on_validation_epoch_end``)
_PLACED_HOOK = re.compile(r"(^|_)step$|^on_\w*(batch|epoch)_(start|end)$|^\w*_epoch_end$")

#: ``torch.nn`` layers that hold weights (a CPU input to ``nn.ReLU`` or ``nn.Dropout`` runs)
WEIGHTED_LAYER = re.compile(r"Linear|Conv|LSTM|GRU|RNN|Embedding|Norm|Attention|Transformer")

#: calls in ``forward`` that place a tensor (a ``forward`` that makes one may place what it gets)
_PLACING = frozenset({"to", "cuda", "type_as"})


def placed_hook(name: str) -> bool:
    """Does Lightning call the method ``name`` once the module is on its device (``training_step``,
    ``validation_step``, ``shared_step``, ``on_train_batch_end``, ``on_validation_epoch_end``)?
    Not ``__init__``, ``setup`` or a helper ``__init__`` calls (``_conv_size``), where the module
    is still on the CPU."""
    return name != "forward" and _PLACED_HOOK.search(name) is not None


def _moves_inputs(function: cst.FunctionDef) -> bool:
    """Does ``function`` call ``.to(...)``/``.cuda()``/``.type_as(...)``, or pass ``device=``?"""
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if node.__class__ is cst.Call:
            func = node.func
            if func.__class__ is cst.Attribute and func.attr.value in _PLACING:
                return True
            if any(a.keyword is not None and a.keyword.value == "device" for a in node.args):
                return True
        stack.extend(node.children)
    return False


def _own_forward(cls_node: cst.ClassDef) -> cst.FunctionDef | None:
    body = cls_node.body.body if cls_node.body.__class__ is cst.IndentedBlock else ()
    found = [s for s in body if s.__class__ is cst.FunctionDef and s.name.value == "forward"]
    return found[0] if len(found) == 1 else None


def built_on_cpu(flow, call: cst.Call) -> cst.Arg | None:
    """The argument of ``call`` that the current Lightning hook built on the CPU (a factory without
    ``device=``, ``torch.tensor([...])``, ``torch.from_numpy``, a tuple of them) when ``call``
    feeds the placed module: ``None`` otherwise, and always outside such a hook. ``flow`` is the
    :class:`devlint.dataflow.DeviceFlow` walking the file."""
    frame = flow.frame
    cls = frame.cls
    if cls is None or not cls.silent or frame.self_name is None or not placed_hook(frame.name):
        return None
    if flow.file_silent or flow.scatters or flow.default_device:
        return None
    func = call.func
    if func.__class__ is cst.Name and func.value == frame.self_name:
        attr = "forward"
    elif func.__class__ is cst.Attribute and flow.is_self(func.value):
        attr = func.attr.value
    else:
        return None
    if attr == "forward":
        forward = _own_forward(cls.node)
        if forward is None or _moves_inputs(forward):
            return None  # no forward here (an inherited one may place its inputs), or one that does
    elif attr not in cls.weighted_layers:
        return None
    for arg in call.args:
        v = flow.value(arg.value)
        if v is not None and v.kind in (CPU, CPUB) and v.group is None and not v.module and not v.explicit:
            return arg
    return None
