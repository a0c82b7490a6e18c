"""Device placement at the inputs of torch's own attention and transformer modules.

``nn.MultiheadAttention`` and the ``nn.Transformer*`` modules take masks (``attn_mask=``,
``key_padding_mask=``, ``mask=``, ``src_mask=``, ``tgt_mask=``, ``memory_mask=``...). A CPU
mask handed to one of them on a GPU is a placement bug whether or not an op of this step
meets it: when the mask equals the causal mask, ``nn.TransformerEncoder`` and
``nn.TransformerDecoder`` replace it by ``is_causal=True`` in training (``torch/nn/modules/
transformer.py``, ``_detect_is_causal_mask``), so no op mixes devices and the step trains, but
evaluation (the fast path), another mask, or a padding mask next to it does mix them. The
stand-in run records such an input as a mix at the module itself (:class:`standin.Mix`).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .standin import Mix, StandIn, Tagged

__all__ = ["TORCH_ATTENTION", "input_hooks"]

#: torch's own modules whose tensor inputs must be on the module's device.
TORCH_ATTENTION = (nn.MultiheadAttention, nn.Transformer, nn.TransformerEncoder, nn.TransformerDecoder,
                   nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)


def input_hooks(model: nn.Module, mode: StandIn) -> list:
    """Forward pre-hooks on every :data:`TORCH_ATTENTION` module of ``model`` that record, in
    ``mode.mixes``, each CPU tensor argument (not 0-dim) handed to a module whose parameters
    are on the stand-in device. Returns the handles, to remove after the run."""
    names = {m: n for n, m in model.named_modules()}
    root = type(model).__name__

    def hook(mod, args, kwargs):
        if not any(isinstance(p, Tagged) for p in mod.parameters(recurse=True)):
            return
        label = f"{names[mod]} ({type(mod).__name__})" if names.get(mod) else f"{root} (the model itself)"
        given = [(f"argument {i}", a) for i, a in enumerate(args)] + list(kwargs.items())
        for key, t in given:
            if isinstance(t, torch.Tensor) and not isinstance(t, Tagged) and t.dim() > 0 \
                    and t.device.type == "cpu":
                op = f"{type(mod).__name__}({key})" if key.startswith("argument") \
                    else f"{type(mod).__name__}({key}=)"
                mode.mixes.append(Mix(op, label, mode.made.get(t) or ("id", id(t)), list(t.shape), False))

    return [m.register_forward_pre_hook(hook, with_kwargs=True) for m in names if isinstance(m, TORCH_ATTENTION)]
