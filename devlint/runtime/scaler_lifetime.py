"""A ``GradScaler`` made anew on every call of the step.

``torch.amp.GradScaler`` carries its loss scale from one step to the next: it starts at
``init_scale`` (65536), halves on a step whose gradients overflow (that step is skipped) and
grows after ``growth_interval`` clean steps. A scaler made inside ``step_fn`` (a local of the
step) starts from ``init_scale`` on every step, so the scale never settles: when this step's
gradients overflow at that scale, every step is skipped on a GPU and the model never trains.
devlint's runs settle the scale by searching for it (:func:`devlint.runtime.runs._settled`),
which would hide that; :func:`step_local` tells such a scaler from one the step made once and
kept (on the model, a global, a closure cell, a trainer object).
"""

from __future__ import annotations

import gc

from .report import Finding

__all__ = ["fresh_scaler_finding", "step_local"]


def step_local(made: list, holders: tuple = ()) -> float | None:
    """The initial scale (``init_scale``, 65536.0 unless the step passed another) of a scaler
    of ``made`` (the enabled ``torch.amp.GradScaler`` objects the step created during this
    call, :func:`devlint.runtime.own_autocast.cuda_on_cpu`) that scaled a loss and is held by
    nothing once the step returned: a local of the step, made again on the next call. None
    when there is no such scaler. ``holders`` are devlint's own containers of it (ignored).
    Runs ``gc.get_referrers`` (tens of ms), only when the step made a scaler."""
    ours = {id(made), *(id(h) for h in holders)}
    for s in made:
        if getattr(s, "_scale", None) is None:
            continue  # never scaled a loss: not the step's scaler
        if not [r for r in gc.get_referrers(s) if id(r) not in ours and not _frame_like(r)]:
            return float(getattr(s, "_init_scale", 65536.0))
    return None


def _frame_like(obj) -> bool:
    # a finished frame of the step or of devlint's own code (a traceback, a generator) holding it
    return type(obj).__name__ in ("frame", "generator", "coroutine")


def fresh_scaler_finding(raw) -> Finding | None:
    """The finding for a float16 run (a ``Raw``) whose step makes its scaler on every call:
    an error when the step was skipped at the scaler's own initial scale (on a GPU, every step
    is), a note otherwise (the scale never grows nor carries an overflow's lesson over)."""
    init = getattr(raw, "fresh_scaler", None)
    if init is None or raw.mode != "float16":
        return None
    skipped = raw.skipped_steps or 0
    if skipped:
        msg = (f"the step makes a new GradScaler on every call: its scale restarts at {init:g} each step, "
               f"and this step's gradients overflow there (the scale that fits, {raw.scale:g}, is "
               f"{skipped} halvings down), so on a GPU every step is skipped and the model never trains")
    else:
        msg = (f"the step makes a new GradScaler on every call: its scale restarts at {init:g} each step "
               "and never settles; a step that overflows there is skipped every time")
    return Finding("step-error", msg, "make the GradScaler once, outside the step, and reuse it every step",
                   module="step_fn (the training step)", op="GradScaler.__init__", device=raw.device,
                   mode=raw.mode, severity="error" if skipped else "info",
                   details={"skipped_steps": skipped})
