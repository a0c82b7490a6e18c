"""Gradients a ``step_fn`` changes in place while they are still multiplied by the loss scale.

With ``torch.amp.GradScaler`` the gradients that ``scaler.scale(loss).backward()`` leaves are
the true ones times the scale (2**16 at first) until ``scaler.unscale_(optimizer)`` (or
``scaler.step``, which unscales first) divides them. Clipping them in between
(``clip_grad_norm_``, ``clip_grad_value_``) or editing ``p.grad`` clips values 65536 times too
large: the float16 step then differs from float32 in a way no tolerance explains, and a
mismatch finding alone would blame whichever module's gradients changed most.

:class:`GradEdits` watches one run: after each backward it notes each gradient's version
counter (a tensor's ``_version`` grows with every in-place op on it, ``torch._foreach_*_``
included), and when ``unscale_`` runs it lists the parameters whose gradient was changed in
place since. Only the float16 runs of a ``step_fn`` with an enabled scaler are watched.
"""

from __future__ import annotations

import torch

__all__ = ["GradEdits"]


class GradEdits:
    """Watch ``model``'s gradients between each backward and ``scaler.unscale_`` (``scaler`` a
    ``torch.amp.GradScaler``; its ``unscale_`` is wrapped on the instance until
    :meth:`close`). ``touched``: the names of the parameters (``model.named_parameters()``)
    whose gradient an in-place op changed in that window, in order, each once."""

    def __init__(self, model: torch.nn.Module, scaler) -> None:
        self.touched: list[str] = []
        self._names = {p: n for n, p in model.named_parameters() if p.requires_grad}
        self._seen: dict = {}
        self._handles = [p.register_post_accumulate_grad_hook(self._after_backward) for p in self._names]
        self._scaler = scaler
        real = scaler.unscale_

        def unscale_(optimizer):
            self._check()
            return real(optimizer)

        scaler.unscale_ = unscale_

    def _after_backward(self, p) -> None:
        g = p.grad
        if g is not None and g.layout == torch.strided:
            self._seen[p] = (id(g), g._version)

    def _check(self) -> None:
        for p, (gid, version) in self._seen.items():
            g = p.grad
            if g is not None and id(g) == gid and g._version != version:
                name = self._names[p]
                if name not in self.touched:
                    self.touched.append(name)
        self._seen.clear()

    def close(self) -> None:
        """Remove the hooks and the wrapper."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._scaler.__dict__.pop("unscale_", None)
