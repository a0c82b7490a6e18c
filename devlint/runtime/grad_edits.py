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

The same window has the opposite mistake: a backward of a loss that ``scaler.scale`` never
multiplied (``loss.backward()`` on some micro-batches of an accumulation, the scaled one on
the last), whose gradients ``unscale_`` then divides by the scale all the same. While it
watches, ``torch.autograd.backward`` (which ``Tensor.backward`` calls) notes whether its roots
come from the scaler's ``scale`` (the root is, or is computed from, one of its outputs), and
``unscaled`` lists the parameters whose gradient still holds such a backward's contribution
when ``unscale_`` runs (one later set to ``None`` or zeroed and refilled is not listed).

The window's other end has a third: a backward of a scaled loss after ``unscale_`` and before
``scaler.step`` (an auxiliary loss backpropagated after clipping): its part of the gradients
stays multiplied by the scale, which ``step`` does not divide again. ``late`` lists the
parameters such a backward reached.
"""

from __future__ import annotations

import torch

__all__ = ["GradEdits"]


class GradEdits:
    """Watch ``model``'s gradients between each backward and ``scaler.unscale_`` (``scaler`` a
    ``torch.amp.GradScaler``; its ``unscale_`` is wrapped on the instance until
    :meth:`close`). ``touched``: the names of the parameters (``model.named_parameters()``)
    whose gradient an in-place op changed in that window, in order, each once. ``unscaled``:
    those whose gradient ``unscale_`` divided while it held the contribution of a backward
    whose loss the scaler never scaled, in order, each once. ``late``: those that a backward of
    a scaled loss reached after ``unscale_`` and before the next ``step``/``update``, in order,
    each once. ``torch.autograd.backward`` and the scaler's ``step``/``update`` are wrapped
    until :meth:`close`."""

    def __init__(self, model: torch.nn.Module, scaler) -> None:
        self.touched: list[str] = []
        self.unscaled: list[str] = []
        self.late: list[str] = []
        self._unscaled_now = False  # unscale_ ran and step/update has not yet
        self._names = {p: n for n, p in model.named_parameters() if p.requires_grad}
        self._seen: dict = {}
        self._pending: dict = {}  # parameter -> (id, version) of a gradient holding an unscaled part
        self._scaled_nodes: list = []  # grad_fn of every output of scaler.scale
        self._in_scaled: bool | None = None  # while a backward runs: whether its roots are scaled
        self._handles = [p.register_post_accumulate_grad_hook(self._after_backward) for p in self._names]
        self._scaler = scaler
        real = scaler.unscale_

        def unscale_(optimizer):
            self._check()
            out = real(optimizer)
            self._unscaled_now = True
            return out

        def ends(real_call):
            def call(*args, **kwargs):
                try:
                    return real_call(*args, **kwargs)
                finally:
                    self._unscaled_now = False
            return call

        def scale(outputs):
            out = type(scaler).scale(scaler, outputs)
            for t in _tensor_leaves(out):
                if t.grad_fn is not None:
                    self._scaled_nodes.append(t.grad_fn)
            return out

        scaler.unscale_ = unscale_
        scaler.scale = scale
        scaler.step, scaler.update = ends(scaler.step), ends(scaler.update)
        self._real_backward = real_backward = torch.autograd.backward

        def backward(tensors, *args, **kwargs):
            outer = self._in_scaled
            self._in_scaled = self._from_scaled(tensors)
            try:
                return real_backward(tensors, *args, **kwargs)
            finally:
                self._in_scaled = outer

        torch.autograd.backward = backward

    def _from_scaled(self, tensors) -> bool:
        """Whether every root of a backward is an output of ``scaler.scale`` or computed from
        one (a walk of the autograd graph from the root, only when it is not one itself)."""
        scaled = {id(n) for n in self._scaled_nodes}
        for t in _tensor_leaves(tensors):
            node = t.grad_fn
            if node is None or id(node) in scaled:
                continue
            seen, todo, found = {id(node)}, [node], False
            while todo and not found:
                for nxt, _ in todo.pop().next_functions:
                    if nxt is None or id(nxt) in seen:
                        continue
                    if id(nxt) in scaled:
                        found = True
                        break
                    seen.add(id(nxt))
                    todo.append(nxt)
            if not found:
                return False
        return True

    def _after_backward(self, p) -> None:
        g = p.grad
        if g is not None and g.layout == torch.strided:
            self._seen[p] = (id(g), g._version)
        if self._in_scaled is None or g is None or g.layout != torch.strided:
            return
        if self._unscaled_now and self._in_scaled and self._names[p] not in self.late:
            self.late.append(self._names[p])
        held = self._pending.get(p)
        # this backward added to the same gradient in place (one version on): it still holds
        # the unscaled part; anything else (a new tensor, a zero_ in between) dropped it
        still = held is not None and held == (id(g), g._version - 1)
        if not self._in_scaled or still:
            self._pending[p] = (id(g), g._version)
        else:
            self._pending.pop(p, None)

    def _check(self) -> None:
        for p, (gid, version) in self._seen.items():
            g = p.grad
            if g is not None and id(g) == gid and g._version != version:
                name = self._names[p]
                if name not in self.touched:
                    self.touched.append(name)
        self._seen.clear()
        for p, held in self._pending.items():
            g = p.grad
            if g is not None and held == (id(g), g._version) and self._names[p] not in self.unscaled:
                self.unscaled.append(self._names[p])
        self._pending.clear()

    def close(self) -> None:
        """Remove the hooks and the wrapper."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._scaler.__dict__.pop("unscale_", None)
        for name in ("scale", "step", "update"):
            self._scaler.__dict__.pop(name, None)
        if torch.autograd.backward is not self._real_backward:
            torch.autograd.backward = self._real_backward
        self._scaled_nodes = []


def _tensor_leaves(obj) -> list:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensor_leaves(v)]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensor_leaves(v)]
    return []
