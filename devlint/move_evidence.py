"""Which device moves of a function say where its batch lives, and which leave a value behind on purpose.

Mixed into :class:`devlint.dataflow.DeviceFlow` (DEV111). The rule takes the author's move of
one item of a batch as evidence that the others came unmoved; these readings tell the moves that
are no such evidence (a move onto another value's device, a copy kept beside its original), the
values an author keeps unmoved on purpose (a name moved inline where it is needed), the
``collate_fn`` that places what a loader yields, and the helpers of this file that compute with
their arguments where they are. Each reads one walk of the function's body
(:func:`devlint.later_moves.collected`, kept per immutable node).
"""

from __future__ import annotations

import libcst as cst

from .later_moves import collected, copies, root_name
from .names import dotted


class MoveEvidence:
    """The readings above; needs the flow's ``frame``, ``ctx``, ``_own_definition``,
    ``moves_its_inputs``, ``_device_move`` and ``_other_value``."""

    def _all_moves(self, function: cst.FunctionDef):
        """:func:`collected` of the whole body of ``function`` (every path, no nested def), once
        per function and lint (kept between lints by the language server's memo)."""
        return self._per_lint(("all-moves", id(function)), lambda: self.ctx.remembered(
            "all-moves", function.body, lambda: collected(function.body, straight=False, remembered=self.ctx.remembered)))

    def _straight_moves(self, function: cst.FunctionDef):
        """:func:`collected` of the straight path of ``function``'s body, once per lint."""
        return self._per_lint(("later-moves", id(function)), lambda: self.ctx.remembered(
            "later-moves", function.body, lambda: collected(function.body, remembered=self.ctx.remembered)))

    def _per_lint(self, key: tuple, make):
        """``make()`` once per key in this lint (``Context.remembered`` computes afresh each
        time when no document memo is kept, as on the command line)."""
        memo = self.__dict__.setdefault("_evidence_memo", {})
        if key not in memo:
            memo[key] = make()
        return memo[key]

    def _onto_other_device(self, call: cst.Call) -> bool:
        """``labels.to(device)`` after ``device = data.device`` in this function: a move onto
        the device of another value (not ``self``'s, not a model's), which says where that value
        is, not that the batch came unmoved (as ``x.to(y.device)``)."""
        if call.func.__class__ is not cst.Attribute or call.func.attr.value != "to":
            return False
        target = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
        node = self.frame.node
        if target.__class__ is not cst.Name or node.__class__ is not cst.FunctionDef:
            return False
        seen = self._straight_moves(node)
        source = seen.devices.get(target.value)
        # a named value only: next(self.model.parameters()).device says where the model is
        return source is not None and dotted(source) is not None and self._other_value(source)

    def _copy_moved(self, call: cst.Call) -> bool:
        """``adv = x.clone().detach().to(d)`` in this function (:func:`later_moves.copies`)."""
        node = self.frame.node
        if node.__class__ is not cst.FunctionDef:
            return False
        seen = self._all_moves(node)
        return copies(call, seen.bound_to.get(id(call)))

    def _moving_collate(self, expr: cst.BaseExpression) -> bool:
        """``collate_fn=self.smart_batching_collate``: a method of this class (or a function of
        this file) that moves something to a device anywhere in its body, so the loader's
        batches may come out placed (also ``feature, label = self._get_fl(data)``: a helper
        that may return the items it parses placed)."""
        own = self._own_definition(expr)
        if own is None:
            return False
        seen = self._all_moves(own)
        return any(id(c) not in seen.dropped and self._device_move(c) for c in seen.moves)

    def _moved_as_copy(self, expr: cst.BaseExpression) -> bool:
        """Is the name ``expr`` moved somewhere in this function without being rebound to its
        move (``model(x_batch.to(d))``, ``adv = x.clone().to(d)``)? The author then moves this
        very value where it is needed, and keeps the original as it came on purpose (torchcp's
        ACI predictor hands the unmoved ``x_batch`` to a helper that reads only its shape)."""
        node = self.frame.node
        if expr.__class__ is not cst.Name or node.__class__ is not cst.FunctionDef:
            return False
        seen = self._all_moves(node)
        for call in seen.moves:
            if id(call) in seen.dropped or root_name(call.func.value) != expr.value:
                continue
            if expr.value not in seen.bound_to.get(id(call), ()) and self._device_move(call):
                return True
        return False

    def _computes_in_place(self, function: cst.FunctionDef) -> bool:
        """Does ``function`` (of this file) compute with its arguments where they are: it moves
        nothing (no ``.to``/``.cuda``) and reads nothing back to the host (no ``.cpu()``,
        ``.numpy()``, ``.tolist()``), as ``accuracy(output, target)`` does with ``output.eq(target)``?"""
        def judged() -> bool:
            if self.moves_its_inputs(function):
                return False
            seen = self._all_moves(function)
            if seen.moves:
                return False
            text = cst.Module([]).code_for_node(function.body)
            return not any(word in text for word in (".cpu(", ".numpy(", ".tolist(", "np.", "numpy."))
        return self._per_lint(("computes-in-place", id(function)), judged)

    def _moved_for_another_model(self, callee: cst.BaseExpression | None) -> bool:
        """Is every device move of this function's parameters onto the device of a model other
        than ``callee`` (``generated.to(self.ref_model.device)`` beside ``self.model(generated)``)?
        The author then places a copy where a second model lives (a frozen reference, a teacher),
        which says nothing of where the called model's inputs are."""
        node = self.frame.node
        called = dotted(callee) if callee is not None else None
        if called is None or node.__class__ is not cst.FunctionDef:
            return False
        seen = self._all_moves(node)
        others = 0
        for call in seen.moves:
            if id(call) in seen.dropped or root_name(call.func.value) not in self.frame.params or not self._device_move(call):
                continue
            target = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
            if (target.__class__ is not cst.Attribute or target.attr.value != "device" or not self.model_named(target.value)
                    or dotted(target.value) in (None, called)):
                return False
            others += 1
        return others > 0

