"""Turn failed runs into findings that name the cause: the module, op, tensor or buffer.

:func:`devlint.runtime.check_step` calls these once a run is judged: placement findings from
the stand-in run, master weights, the first non-finite op (a diagnostic replay,
:mod:`devlint.runtime.probes`), a mismatch with its unstable module, float16 underflow, and
the deprecation warnings the step raised.
"""

from __future__ import annotations

import os
import re

import torch

from . import probes, swamp_probe, underflow_probe
from .by_module import tiny_counts
from .compare import DTYPES, Tolerances, Verdict
from .names import first_line, module_of, reachable_tensors
from .report import STAND_IN_RUN, Finding

__all__ = ["placement_findings", "master_weights", "nonfinite_finding", "mismatch_finding",
           "hidden_overflow", "underflow_finding", "deprecations", "MAX_LISTED"]

#: At most this many parameters are listed per mismatching run.
MAX_LISTED = 5
_HERE = os.path.dirname(os.path.abspath(__file__))
_LOW = (torch.float16, torch.bfloat16)


_MISMATCH = 'on a GPU this step fails with "Expected all tensors to be on the same device"'
#: What CUDA says for a CPU tensor indexed by device indices (``standin._INDEXED``).
_INDEXED = ('on a GPU this step fails with "indices should be either on cpu or on the same device as '
            'the indexed tensor (cpu)"')


def placement_findings(raw, step=None) -> list[Finding]:
    """Turn the stand-in run's mixes into ``device-placement`` findings, one per distinct
    tensor (a layer in a plain list counts once). ``step``: the step run, whose globals and
    closures name a CPU tensor it never moves (:func:`names.reachable_tensors`)."""
    findings: list[Finding] = []
    seen: set = set()
    reachable = None
    for mix in raw.mixes:
        kind, name, holder = (raw.unmoved.get(mix.key[1], (None,) * 3) if mix.key[0] == "id"
                              else (None,) * 3)
        key = (kind, holder or name) if kind else mix.key
        if key in seen:
            continue
        seen.add(key)
        where = f"{mix.op} in {mix.module}" + (" (backward)" if mix.backward else "") + (
            f" inside {mix.function} (a custom torch.autograd.Function)" if getattr(mix, "function", None) else "")
        said = _INDEXED if mix.op.startswith(("aten.index.", "aten.index_put", "aten._index_put")) else \
            _MISMATCH if not mix.op.endswith(")") else (  # an input of torch's own module
            "on a GPU that module meets a CPU tensor (\"Expected all tensors to be on the same device\" "
            "where it uses it, in training or in evaluation)")
        if kind == "attribute":
            findings.append(Finding(
                "device-placement",
                f"tensor attribute {name} is a plain tensor, not a buffer, so model.to(device) "
                f"leaves it on the CPU; {where} uses it with tensors on the model's device: {said}",
                "register it in __init__ with self.register_buffer(...)",
                module=mix.module, name=name, op=mix.op, device=STAND_IN_RUN, related="DEV113"))
        elif kind == "list":
            container = name.split("[", 1)[0]
            findings.append(Finding(
                "device-placement",
                f"layer {holder} is held in the plain Python container {container}, so "
                f"model.to(device) leaves its parameters on the CPU and the optimizer never sees "
                f"them; {mix.op} uses {name} with tensors on the model's device: {said}",
                f"hold the layers in nn.ModuleList (or nn.ModuleDict) instead of {container}",
                module=f"{holder}, in a plain container", name=name, op=mix.op, device=STAND_IN_RUN,
                related="DEV114"))
        elif mix.key[0] == "host" and mix.op == "pack_padded_sequence":
            findings.append(Finding(
                "device-placement",
                f"pack_padded_sequence in {mix.module} gets its lengths (shape {mix.shape}) on the model's "
                "device: on a GPU this step fails with \"'lengths' argument should be a 1D CPU int64 tensor\"",
                "pass the lengths on the CPU: pack_padded_sequence(x, lengths.cpu(), ...)",
                module=mix.module, name=f"lengths of shape {mix.shape}", op="nn.utils.rnn.pack_padded_sequence",
                device=STAND_IN_RUN))
        elif mix.key[0] == "host":
            findings.append(Finding(
                "device-placement",
                f"{mix.op}() in {mix.module} reads a tensor of shape {mix.shape} that is on the model's "
                "device: on a GPU this step fails with \"can't convert cuda:0 device type tensor to numpy\"",
                "copy it to the host first (t.detach().cpu().numpy()), or compute it with torch ops",
                module=mix.module, name=f"tensor of shape {mix.shape}", op=mix.op, device=STAND_IN_RUN))
        elif mix.key[0] == "generator":
            gen = f"the CPU torch.Generator {mix.key[1]}" if mix.key[1] else "a CPU torch.Generator"
            findings.append(Finding(
                "device-placement",
                f"{gen} drives {where}, which makes random numbers on the model's device: on a GPU "
                "this step fails with \"Expected a 'cuda' device type for generator but found 'cpu'\"",
                "make the generator on the model's device: torch.Generator(device=x.device)",
                module=mix.module, name=mix.key[1] or "torch.Generator", op=mix.op, device=STAND_IN_RUN))
        elif mix.key[0] == "made":
            maker, maker_module = mix.key[1], mix.key[2]
            findings.append(Finding(
                "device-placement",
                f"{maker} in {maker_module} creates a tensor on the CPU (no device=), and {where} "
                f"uses it (shape {mix.shape}) with tensors on the model's device: {said}",
                "pass device=x.device to the factory (or use a registered buffer)" if "(called by " not in maker
                else "give that torch function tensors on the model's device (torch.tensor(v, device=x.device))",
                module=maker_module, name=f"tensor of shape {mix.shape} from {maker}", op=mix.op,
                device=STAND_IN_RUN, related="DEV112"))
        else:
            if reachable is None:
                reachable = reachable_tensors(step) if step is not None and mix.key[0] == "id" else {}
            named = reachable.get(mix.key[1]) if mix.key[0] == "id" else None
            if named:
                findings.append(Finding(
                    "device-placement",
                    f"tensor {named} is on the CPU and the step never moves it; {where} uses it "
                    f"(shape {mix.shape}) with tensors on the model's device: {said}",
                    "make it a buffer of the module that uses it (register_buffer), or move it with "
                    ".to(x.device) where it is used",
                    module=mix.module, name=named, op=mix.op, device=STAND_IN_RUN))
                continue
            findings.append(Finding(
                "device-placement",
                f"a CPU tensor of shape {mix.shape} that the step never moves (a global, a closure, "
                f"or a batch object devlint cannot walk) is used with tensors on the model's device in {where}; "
                f"{said}",
                "move it with .to(device) where the model is moved, or make it a buffer",
                module=mix.module, name=f"tensor of shape {mix.shape}", op=mix.op, device=STAND_IN_RUN))
    return findings


def master_weights(step) -> Finding | None:
    """The ``master-weights`` finding for trainable (``requires_grad``) float16/bfloat16
    parameters, else None: a frozen low-precision part (a QLoRA-style base, a frozen teacher)
    gets no gradient to unscale and no update to lose, and autocast casts its operands."""
    low = [(n, p.dtype) for n, p in step.model.named_parameters() if p.dtype in _LOW and p.requires_grad]
    if not low:
        return None
    name, dtype = low[0]
    dt = str(dtype).replace("torch.", "")
    more = f" and {len(low) - 1} more" if len(low) > 1 else ""
    return Finding(
        "master-weights",
        f"{len(low)} parameters are {dt}, not float32 ({name}{more}): updates smaller than "
        f"{dt} resolution are lost, and torch.amp.GradScaler raises \"Attempting to unscale FP16 "
        "gradients\"",
        "keep the model in float32 (drop model.half()) and let torch.autocast cast per op",
        module=module_of(step.model, name), name=name, op="GradScaler.unscale_",
        related="DEV208", details={"count": len(low), "dtype": dt})


def _op(nf) -> str:
    """The op of a :class:`probes.NonFinite`, said to be in place when it overwrote its input."""
    op = f"{nf.op} (in place: it overwrites its input)" if nf.in_place else nf.op
    if getattr(nf, "feeds", None):  # autocast casts an op's operands: name the op it cast for
        op = f"{op} (the cast of an operand of {nf.feeds} to {nf.out_dtype})"
    function = getattr(nf, "function", None)
    return f"{op} inside {function} (a custom torch.autograd.Function)" if function else op


def region_note(raw) -> str | None:
    """A note for a run whose step opened its own ``torch.autocast("cuda", ...)`` region of
    another dtype than the run's mode (made the CPU's, :func:`own_autocast.cuda_on_cpu`), so
    the row says what it computed there; None otherwise."""
    other = sorted(set(getattr(raw, "regions", ())) - {raw.mode, "float32"})
    if not other or raw.mode == "float32":
        return None
    return (f"{raw.device} {raw.mode}: the step opens its own torch.autocast('cuda') region in "
            f"{' and '.join(other)}, which this run follows there, as a GPU would")


def nonfinite_finding(step, raw, runs: dict, seed: int) -> Finding:
    dtype = DTYPES[raw.mode]
    other = sorted(set(getattr(raw, "regions", ())) - {raw.mode, "float32"})
    inside = ""
    if other:  # the step's own torch.autocast("cuda", ...) ran in another dtype: replay in that
        dtype = DTYPES[other[0]]
        inside = f" (the step's own autocast region is {other[0]}, as on a GPU)"
    try:
        nf = probes.nonfinite_probe(step, raw.device, dtype, seed, scale=raw.scale or 1.0,
                                    kernels=raw.kernels or "emulated")
    except Exception as exc:  # noqa: BLE001
        nf, why = None, first_line(exc)
    else:
        why = "no op produced inf/NaN when replayed"
    clean = ""
    if raw.mode == "float16":
        o = runs.get((raw.device, "bfloat16"))
        if o is not None and o.error is None and not o.nonfinite and o.ok:
            clean = f"; bfloat16 runs clean on {raw.device} (same exponent range as float32)"
        elif o is not None and not set(getattr(o, "regions", ())) - {"bfloat16", "float32"}:
            clean = f"; bfloat16 is not clean on {raw.device} either"
    what = "the loss is inf/NaN" if raw.error is None else raw.error
    if nf is None:
        return Finding("non-finite", f"{what} in the {raw.mode} run{inside} ({why}){clean}",
                       "find the overflowing op by running the step under torch.autograd.detect_anomaly",
                       device=raw.device, mode=raw.mode)
    ins = ", ".join(f"{d} {s} in [{lo:.3g}, {hi:.3g}]" for d, s, lo, hi in nf.inputs) or "no float inputs"
    limit = f" ({str(dtype).removeprefix('torch.')} max {torch.finfo(dtype).max:g})" if dtype != torch.float32 else ""
    phase = "backward of " if nf.backward else ""
    flushed = None
    if nf.inputs_finite:
        msg = (f"{what} in the {raw.mode} run{inside}: the first op whose output is inf/NaN is {phase}{_op(nf)} in "
               f"{nf.module}, output {nf.out_dtype}, inputs {ins}{limit}{clean}")
        flushed = _zero_from_underflow(step, raw, nf, dtype, seed)
        if flushed is not None:
            cast = f" (a cast to {flushed.dtype}, as autocast casts operands)" if "_to_copy" in flushed.op else ""
            msg = (f"{what} in the {raw.mode} run{inside}: the first op whose output is inf/NaN is {phase}{_op(nf)} in "
                   f"{nf.module}, output {nf.out_dtype}, inputs {ins}; before it, {flushed.op}{cast} in "
                   f"{flushed.module} underflows: {flushed.flushed} of its {flushed.nonzero} "
                   f"non-zero float32 values (up to {flushed.largest:.1e}) are 0 in {flushed.dtype} "
                   f"(smallest normal {torch.finfo(dtype).tiny:.1e}){clean}")
    else:
        msg = (f"{what} in the {raw.mode} run{inside}: {nf.module} already holds inf/NaN before the step{clean}")
    fix = ("use dtype=torch.bfloat16 in autocast, scale values down before this op, or run it in "
           "float32 with torch.autocast(..., enabled=False)")
    if flushed is not None:
        fix = ("keep such values in float32 (torch.autocast(..., enabled=False) around them), "
               "rescale them as they shrink, or work with logarithms")
    if raw.mode == "float32":
        fix = "keep this op's inputs in its domain (no log of negatives, no 0/0)"
    details = {"inputs": [list(i) for i in nf.inputs], "backward": nf.backward, "out_dtype": nf.out_dtype}
    if getattr(nf, "feeds", None):
        details["feeds"] = nf.feeds
    if flushed is not None:
        details["flushed"] = {"op": flushed.op, "module": flushed.module, "count": flushed.flushed,
                              "nonzero": flushed.nonzero}
    return Finding("non-finite", msg, fix, module=nf.module, op=nf.op, device=raw.device,
                   mode=raw.mode, details=details)


def _zero_from_underflow(step, raw, nf, dtype, seed: int):
    """For a low-precision run whose first inf/NaN op is in the forward and has a zero among its
    finite inputs (``log(0)``, ``x / 0``): the first op that flushed to zero values float32 keeps
    (:func:`underflow_probe.underflow_probe`), or None."""
    if raw.mode == "float32" or nf.backward or not any(lo <= 0 <= hi for _, _, lo, hi in nf.inputs):
        return None
    try:
        return underflow_probe.underflow_probe(step, raw.device, dtype, seed, kernels=raw.kernels or "emulated")
    except Exception:  # noqa: BLE001 - the diagnosis is best effort
        return None


def _listed(names: list) -> str:
    """The first :data:`MAX_LISTED` names, comma-separated, and how many more there are."""
    more = f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""
    return ", ".join(names[:MAX_LISTED]) + more


def mismatch_finding(step, raw, verdict: Verdict, seed: int, tol: Tolerances) -> Finding:
    model = step.model
    listed = verdict.worst[:MAX_LISTED]
    names = ("largest parts: " + ", ".join(f"{n} (its own error {e:.1e})" for n, e, _ in listed)
             if listed else "no parameter beyond its own limit")
    more = f" and {len(verdict.worst) - MAX_LISTED} more" if len(verdict.worst) > MAX_LISTED else ""
    first = listed[0][0].replace(" (update)", "") if listed else None
    module = module_of(model, first) if first else "loss_fn"
    culprit = ""
    details = {"worst": [list(w) for w in verdict.worst[:20]], "grad_err": verdict.grad_err,
               "floor": verdict.floor, "loss_err": verdict.loss_err}
    fit = raw.errors.uniform_factor(tol) if raw.errors is not None else None
    edited = getattr(raw, "grad_edits", None)
    if edited:  # the step changed scaled gradients in place before unscaling them: the cause
        shown = _listed(edited)
        factor = ""
        if fit is not None and abs(fit[0] - 1) > 0.5 and fit[1] < 0.1:
            factor = f", the float32 ones times {fit[0]:.2g}, one factor for the whole model"
            details.update(factor=fit[0], residual=fit[1])
        return Finding(
            "mismatch",
            f"{raw.mode} gradients on {raw.device} differ from float32 (whole-model error "
            f"{verdict.grad_err:.1e}{factor}) because the step changes gradients in place after "
            f"backward and before scaler.unscale_(optimizer) ({shown}): it clips or edits "
            "gradients still multiplied by the loss scale",
            "call scaler.unscale_(optimizer) after backward and before clipping or editing .grad",
            module="step_fn (the training step)", name=edited[0], op="GradScaler.unscale_",
            device=raw.device, mode=raw.mode, related="DEV205", details={**details, "edited": edited})
    unscaled = getattr(raw, "grad_unscaled", None)
    if unscaled:  # a backward of a loss the scaler never scaled, then divided by the scale
        shown = _listed(unscaled)
        return Finding(
            "mismatch",
            f"{raw.mode} gradients on {raw.device} differ from float32 (whole-model error "
            f"{verdict.grad_err:.1e}) because the step calls backward() on a loss that scaler.scale "
            f"never multiplied, and scaler.unscale_ then divides those gradients by the loss scale "
            f"too ({shown}): every backward() before scaler.step must be of a scaled loss (a second "
            f"pass, as sharpness-aware minimisation's, or each accumulated micro-batch)",
            "scale every loss that is backpropagated before scaler.step: scaler.scale(loss).backward()",
            module="step_fn (the training step)", name=unscaled[0], op="GradScaler.scale",
            device=raw.device, mode=raw.mode, related="DEV203", details={**details, "unscaled": unscaled})
    late = getattr(raw, "grad_late", None)
    if late:  # a scaled backward after unscale_: its part is stepped still times the scale
        shown = _listed(late)
        return Finding(
            "mismatch",
            f"{raw.mode} gradients on {raw.device} differ from float32 (whole-model error "
            f"{verdict.grad_err:.1e}) because the step calls scaler.scale(loss).backward() after "
            f"scaler.unscale_(optimizer) and before scaler.step ({shown}): that part of the "
            "gradients is applied still multiplied by the loss scale",
            "backpropagate every loss before scaler.unscale_(optimizer), or add the losses first",
            module="step_fn (the training step)", name=late[0], op="GradScaler.unscale_",
            device=raw.device, mode=raw.mode, related="DEV205", details={**details, "late": late})
    if fit is not None and abs(fit[0] - 1) > 0.5 and fit[1] < 0.1:
        # one factor for the whole model: the step rescaled the gradients, no module is unstable
        c, r = fit
        where = "step_fn" if step.step_fn is not None else "loss_fn"
        details.update(factor=c, residual=r)
        return Finding(
            "mismatch",
            f"{raw.mode} gradients on {raw.device} are the float32 ones times {c:.2g}, one factor "
            f"for the whole model (whole-model error {verdict.grad_err:.1e}, what is left after "
            f"that factor {r:.1e}): the step rescales gradients, e.g. clips or reads them before "
            "scaler.unscale_(optimizer), unscales twice or never, or scales the loss by hand",
            "call scaler.unscale_(optimizer) once per step, after backward and before clipping or "
            "reading .grad",
            module=f"{where} (the training step)", device=raw.device, mode=raw.mode,
            related="DEV205" if raw.mode == "float16" else None, details=details)
    flushed = _flushed(step, raw, verdict, seed)
    if flushed is not None:  # the loss itself went to zero in the low precision: the cause
        tiny = torch.finfo(DTYPES[raw.mode]).tiny
        details["flushed"] = {"op": flushed.op, "count": flushed.flushed, "nonzero": flushed.nonzero}
        return Finding(
            "mismatch",
            f"the {raw.mode} loss on {raw.device} differs from float32's (loss error "
            f"{verdict.loss_err:.1e}): {flushed.op} in {flushed.module} underflows, {flushed.flushed} "
            f"of its {flushed.nonzero} non-zero float32 values (up to {flushed.largest:.1e}) are 0 in "
            f"{flushed.dtype}, below its smallest normal {tiny:.1e}",
            "compute it in float32 (.float() inputs under torch.autocast(..., enabled=False)), or "
            "scale the values up before it",
            module=flushed.module, op=flushed.op, device=raw.device, mode=raw.mode, details=details)
    if raw.mode != "float32":
        try:
            unstable = probes.unstable_modules(step, raw.device, raw.mode, seed, k=tol.k,
                                               kernels=raw.kernels or "emulated")
        except Exception:  # noqa: BLE001 - the diagnosis is best effort
            unstable = []
        if unstable:
            label, e_low, e_round = unstable[0]
            module = label
            culprit = (f"; the first module whose output drifts is {label}: output error "
                       f"{e_low:.1e} under autocast vs {e_round:.1e} from rounding its inputs")
            details["unstable_modules"] = [list(u) for u in unstable]
        overflow = hidden_overflow(step, raw, seed)
        if overflow is not None:  # an inf the step then hides (rsqrt(inf) = 0, clamp, where)
            culprit += overflow[1]
            module = module if unstable else overflow[0]
        swamped = _swamped(step, raw, seed) if not unstable and overflow is None else None
        if swamped is not None:  # an accumulation in the low precision that loses its increments
            details["swamped"] = {"op": swamped.op, "module": swamped.module, "calls": swamped.calls,
                                  "share": swamped.share}
            return Finding(
                "mismatch",
                f"{raw.mode} gradients on {raw.device} are beyond what {raw.mode} reaches on this model "
                f"(whole-model error {verdict.grad_err:.1e}): {swamped.op} in {swamped.module} accumulates "
                f"in {swamped.dtype} over {swamped.calls} calls, and rounding takes {swamped.share:.0%} of "
                f"its increments (those below the sum's {swamped.dtype} spacing; float32 keeps them)",
                "keep the accumulated state in float32 (s = s.float() before the loop, s = s + "
                "step.float()); autocast keeps add's inputs' dtype",
                module=swamped.module, op=swamped.op, device=raw.device, mode=raw.mode, details=details)
    loss = "" if verdict.loss_ok else f"; loss error {verdict.loss_err:.1e}"
    if not listed and verdict.missing:
        names = f"gradients present in only one of the runs: {', '.join(verdict.missing[:MAX_LISTED])}"
    return Finding(
        "mismatch",
        f"{raw.mode} gradients on {raw.device} are beyond what {raw.mode} reaches on this model "
        f"(whole-model error {verdict.grad_err:.1e}"
        + (f", noise floor {verdict.floor:.1e}, limit {listed[0][2]:.1e}"
           if verdict.floor is not None and listed else "")
        + f"); {names}{more}{loss}{culprit}",
        "run the named module in float32 (torch.autocast(..., enabled=False) around it, inputs "
        ".float()), or pass looser Tolerances",
        module=module, name=first, device=raw.device, mode=raw.mode, details=details)


def _flushed(step, raw, verdict: Verdict, seed: int):
    """For a low-precision run whose loss mismatches: the first op that flushes to zero what
    float32 keeps (:func:`underflow_probe.underflow_probe`), or None."""
    if raw.mode == "float32" or verdict.loss_ok or verdict.loss_err is None:
        return None
    try:
        return underflow_probe.underflow_probe(step, raw.device, DTYPES[raw.mode], seed,
                                               kernels=raw.kernels or "emulated")
    except Exception:  # noqa: BLE001 - the diagnosis is best effort
        return None


def _swamped(step, raw, seed: int):
    """For a low-precision run whose mismatch no other replay explains: the accumulation that
    loses its increments whole (:func:`swamp_probe.swamp_probe`), or None."""
    try:
        return swamp_probe.swamp_probe(step, raw.device, DTYPES[raw.mode], seed, kernels=raw.kernels or "emulated")
    except Exception:  # noqa: BLE001 - the diagnosis is best effort
        return None


def hidden_overflow(step, raw, seed: int) -> tuple[str, str] | None:
    """For a mismatching float16 run whose loss and gradients are finite: the first op that
    still made inf/NaN from finite inputs (the step hid it: ``x * rsqrt(inf)`` is 0), as
    ``(module, message part)``; None when there is none or the replay fails."""
    if raw.mode != "float16":
        return None
    try:
        nf = probes.nonfinite_probe(step, raw.device, DTYPES[raw.mode], seed, scale=raw.scale or 1.0,
                                    kernels=raw.kernels or "emulated")
    except Exception:  # noqa: BLE001 - the diagnosis is best effort
        return None
    if nf is None or not nf.inputs_finite:
        return None
    ins = ", ".join(f"{d} {s} in [{lo:.3g}, {hi:.3g}]" for d, s, lo, hi in nf.inputs) or "no float inputs"
    phase = "backward of " if nf.backward else ""
    return nf.module, (f"; {phase}{_op(nf)} in {nf.module} overflows float16 (max 65504) and the step "
                       f"hides the inf: output {nf.out_dtype}, inputs {ins}")


def underflow_finding(step, raw, ref, tol: Tolerances) -> Finding | None:
    """Gradient elements lost to float16 underflow.

    With a GradScaler in use the loss is multiplied by the scale, so what underflows is
    estimated from the reference: elements non-zero in float32 but below float16's smallest
    subnormal (2**-24) in magnitude, and how many of them the scaled run keeps; this is
    information, not an error: the step already does what fixes underflow. Without a scaler (a custom
    step_fn that never calls ``scaler.scale``) the run's own zeros are counted, and a
    fraction above ``tol.underflow`` is an error.
    """
    total = sum(g.numel() for g in ref.grads.values() if g is not None)
    if not total or raw.errors is None:
        return None
    if not raw.scaler_used:
        lost = sum(p.zeros for p in raw.errors.params.values())
        kept, info = 0, False
    else:
        tiny = tiny_counts(ref.grads, ref.norms)
        lost = sum(tiny.values())
        kept = lost - sum(min(raw.errors.params[n].zeros, m) for n, m in tiny.items() if n in raw.errors.params)
        info = True  # the step scales its loss: what float16 cannot hold is its range, not a bug
    frac = lost / total
    own = set(getattr(raw, "regions", ()))
    if frac <= tol.underflow and not raw.scaler_used and (not own or "float16" in own):
        # said, not failed: this batch loses little (a step whose own regions are bfloat16 needs no scaler)
        return Finding(
            "underflow", f"the step never calls scaler.scale(loss) in the float16 run: its gradients "
            f"are not scaled ({frac:.1%} of elements, {lost} of {total}, are lost to float16 underflow "
            "on this batch; smaller gradients later in training lose more)",
            "scale the loss with the scaler the step is given: scaler.scale(loss).backward(), "
            "scaler.step(optimizer), scaler.update()",
            op="GradScaler.scale", module="step_fn (the training step)", device=raw.device,
            mode="float16", related="DEV203", severity="info",
            details={"fraction": frac, "lost": lost, "total": total, "kept_by_scaler": 0})
    if frac <= tol.underflow:
        return None
    worst = max((n for n, g in ref.grads.items() if g is not None),
                key=lambda n: tiny[n] if raw.scaler_used
                else raw.errors.params.get(n).zeros if n in raw.errors.params else 0)
    if raw.scaler_used:
        msg = (f"{frac:.1%} of gradient elements ({lost} of {total}) are below float16's smallest "
               f"subnormal (2**-24) and would be zero without loss scaling; the GradScaler at scale "
               f"{raw.scale:g} keeps {kept} of them")
    else:
        why = ("its own GradScaler is disabled: made with enabled=False, scaler.scale(loss) returns "
               "the loss unscaled" if getattr(raw, "disabled_scaler", False)
               else "scaler.scale(loss) is never called")
        msg = (f"{frac:.1%} of gradient elements ({lost} of {total}) are zero in the float16 run but "
               f"non-zero in float32: the step does not scale the loss ({why})")
    fix = ("enable the GradScaler for float16 (check the condition its enabled= is given), or "
           "autocast to bfloat16" if not raw.scaler_used and getattr(raw, "disabled_scaler", False) else
           "keep torch.amp.GradScaler with float16 (scaler.scale(loss).backward()), or autocast to bfloat16")
    return Finding(
        "underflow", msg, fix,
        module=module_of(step.model, worst), name=worst, op="float16 backward", device=raw.device,
        mode="float16", related="DEV202",
        details={"fraction": frac, "lost": lost, "total": total, "kept_by_scaler": kept},
        severity="info" if info else "error")


def deprecations(caught) -> list[Finding]:
    out, seen = [], set()
    for w in caught:
        if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
            continue
        if os.path.abspath(w.filename).startswith(_HERE):
            continue
        if "site-packages" in w.filename or "dist-packages" in w.filename:
            continue  # a library's own deprecations are not the user's to fix
        text = str(w.message).strip()
        if text in seen:
            continue
        seen.add(text)
        api = re.match(r"`?([\w.]+)\(", text)
        said = [p.strip().rstrip(".") for p in re.split(r"(?<=\.)\s+", text) if p.strip()]
        advice = [p for p in said if p.lower().startswith("please ")]
        what = "; ".join(p for p in said if p not in advice) or text
        fix = advice[0][len("please "):] if advice else "use the replacement the warning names"
        out.append(Finding(
            "deprecation",
            f"{os.path.basename(w.filename)}:{w.lineno} raised {w.category.__name__}: {what}", fix,
            op=api.group(1) if api else None, related="DEV206" if "amp" in text else None,
            details={"file": w.filename, "line": w.lineno}))
    return out


#: The order findings are listed in: causes before the effects they produce (a placement bug,
#: master weights, a misused GradScaler, underflow, an overflow, then the mismatch they cause).
CAUSE_FIRST = {"master-weights": 0, "device-placement": 1, "step-error": 1, "underflow": 2,
               "non-finite": 3, "mismatch": 4}


#: Where code outside the model ran, as the runs name it, and as a step with a ``step_fn``
#: runs it: devlint's runs call the ``step_fn`` instead of ``loss_fn``.
_OUTSIDE = "loss_fn (outside the model)"
_STEP_FN = "step_fn (the training step)"


def cause_first(findings: list[Finding], step=None) -> list[Finding]:
    """``findings`` ordered by :data:`CAUSE_FIRST` (other kinds last), the order found kept
    within a kind. With ``step`` (the :class:`TrainingStep`) given and a ``step_fn`` in it,
    placement and step-error findings of code outside the model name the ``step_fn``, which
    the runs ran (the non-finite replay runs ``loss_fn`` and keeps its name)."""
    if step is not None and step.step_fn is not None:
        for f in findings:
            if f.module == _OUTSIDE and f.kind in ("device-placement", "step-error"):
                f.module = _STEP_FN
                f.message = f.message.replace(f"in {_OUTSIDE}", f"in {_STEP_FN}")
    return sorted(findings, key=lambda f: CAUSE_FIRST.get(f.kind, len(CAUSE_FIRST)))


def state_findings(step, raw, beyond: list, seed: int) -> list[Finding]:
    """Findings for the buffers (and untrained parameters) of one run: ``non-finite`` for
    those that hold inf/NaN after the step where they were finite before it, ``mismatch``
    for ``beyond`` (``(name, error, limit)`` from :func:`devlint.runtime.buffers.judge_state`).
    Each names the buffer and its module; a non-finite one also the first op that made
    inf/NaN in a replay of the step, when the replay finds one."""
    model = step.model
    params = {n for n, _ in model.named_parameters()}
    if raw.errors is None:  # the reference: what went non-finite in its own step
        bad = list(raw.state_nonfinite)
    else:
        bad = [(n, e.nonfinite, e.n) for n, e in raw.errors.state.items() if e.nonfinite]
    out = []
    nf = None
    if bad:
        try:
            nf = probes.nonfinite_probe(step, raw.device, DTYPES[raw.mode], seed, scale=raw.scale or 1.0,
                                        kernels=raw.kernels or "emulated")
        except Exception:  # noqa: BLE001 - the diagnosis is best effort
            nf = None
    for name, count, total in bad:
        what = "parameter" if name in params else "buffer"
        module = module_of(model, name)
        where = (f"; the first op whose output is inf/NaN is {'backward of ' if nf.backward else ''}{_op(nf)} "
                 f"in {nf.module}" if nf is not None and nf.inputs_finite else "")
        also = "" if raw.mode == "float32" else ", and in the float32 run"
        out.append(Finding(
            "non-finite",
            f"{what} {name} of {module} holds inf/NaN after the {raw.mode} step ({count} of {total} "
            f"elements; finite before the step{also}): evaluation and the next steps read it{where}",
            "compute the statistic from float32 values (x.float()) into a float32 buffer",
            module=module, name=name, op=nf.op if nf is not None and nf.inputs_finite else None,
            device=raw.device, mode=raw.mode, details={"nonfinite": count, "numel": total}))
    for name, err, limit in beyond:
        what = "parameter" if name in params else "buffer"
        module = module_of(model, name)
        out.append(Finding(
            "mismatch",
            f"{what} {name} of {module} after the {raw.mode} step is {err:.1e} from float32 (relative "
            f"L2), beyond what {raw.mode} reaches on this model (limit {limit:.1e}): evaluation and "
            "the next steps read it",
            "update the buffer from float32 values (x.float()), outside autocast",
            module=module, name=name, device=raw.device, mode=raw.mode,
            details={"error": err, "limit": limit}))
    return out
