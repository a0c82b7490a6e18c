"""Replay a :class:`TrainingStep` per device and mode, compare, probe, and build the report."""

from __future__ import annotations

import copy
import math
import os
import re
import warnings
from dataclasses import dataclass, field

import torch
from torch.utils.module_tracker import ModuleTracker

from . import probes
from .compare import Tolerances, compare_tensors, loss_ok, resolve_tolerances
from .report import Finding, Report, Run
from .step import TrainingStep, map_tensors

__all__ = ["check_step", "MODES", "DEVICES", "MAX_SCALER_STEPS"]

MODES = ("float32", "bfloat16", "float16")
DEVICES = ("cpu", "cuda", "mps")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
#: GradScaler calibration: at most this many tries of the step (each from the same starting
#: weights), halving the scale after each skipped one: 2**16 down to 2**11.
MAX_SCALER_STEPS = 6
#: At most this many ``mismatch`` findings per run; the rest are counted in a note.
MAX_MISMATCH_FINDINGS = 10
_HERE = os.path.dirname(os.path.abspath(__file__))
_LOW = (torch.float16, torch.bfloat16)


@dataclass
class _Raw:
    device: str
    mode: str
    loss: float | None = None
    grads: dict = field(default_factory=dict)
    updates: dict = field(default_factory=dict)
    skipped_steps: int | None = None
    scale: float | None = None
    nonfinite: bool = False
    error: str | None = None
    error_kind: str | None = None  # "device", "fp16-grads", "other"
    module: str | None = None


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0].rstrip(".")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _scalar_loss(loss) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"loss_fn returned {type(loss).__name__}; return a scalar tensor")
    if loss.numel() != 1 or not loss.is_floating_point():
        raise TypeError(f"loss_fn returned a {loss.dtype} tensor of shape {list(loss.shape)}; "
                        "return a scalar floating-point loss")
    return loss.reshape(())


def _run(step: TrainingStep, device: str, mode: str, seed: int, scaled: bool = True) -> _Raw:
    """One step on a deep copy of the model. float16 with ``scaled`` uses a GradScaler."""
    raw = _Raw(device, mode)
    tracker = ModuleTracker()
    model = None
    phase = "copying the model"
    try:
        model = copy.deepcopy(step.model)
        batch = step.batch
        if mode == "float32" and any(p.dtype in _LOW for p in model.parameters()):
            model.float()  # the float32 run is float32 even for a model.half()
            batch = map_tensors(lambda t: t.float() if t.dtype in _LOW else t, batch)
        model.to(device)
        batch = map_tensors(lambda t: t.to(device), batch)
        named = list(model.named_parameters())
        before = {n: p.detach().to("cpu", torch.float32, copy=True) for n, p in named}
        scaler = torch.amp.GradScaler(device) if mode == "float16" and scaled else None
        start = copy.deepcopy(model.state_dict()) if scaler else None
        if scaler:
            raw.skipped_steps = 0
        for attempt in range(MAX_SCALER_STEPS if scaler else 1):
            if attempt:
                model.load_state_dict(start)
            torch.manual_seed(seed)
            phase = "optimizer"
            optimizer = step.optimizer(model.parameters())
            model.zero_grad(set_to_none=True)
            phase = "step"
            with tracker:
                with torch.autocast(device_type=device, dtype=DTYPES[mode], enabled=mode != "float32"):
                    loss = _scalar_loss(step.loss_fn(model, batch))
                raw.loss = float(loss.detach().float())
                if not math.isfinite(raw.loss):
                    raw.nonfinite = True
                    return raw
                if scaler:
                    scale = scaler.get_scale()
                    scaler.scale(loss).backward()
                    scaler.unscale_(optimizer)
                else:
                    loss.backward()
            grads = {n: None if p.grad is None else p.grad.detach().to("cpu", torch.float32, copy=True)
                     for n, p in named}
            if scaler:
                scaler.step(optimizer)
                scaler.update()
                if scaler.get_scale() < scale:
                    raw.skipped_steps += 1
                    continue
                raw.scale = scale
            else:
                optimizer.step()
            break
        else:
            raw.nonfinite = True
            raw.error = (f"GradScaler skipped all {MAX_SCALER_STEPS} steps: gradients are inf/NaN "
                         f"at every scale down to {scale:g}")
            raw.scale = scale
            return raw
        raw.grads = grads
        raw.updates = {n: p.detach().to("cpu", torch.float32) - before[n] for n, p in named}
    except Exception as exc:  # noqa: BLE001 - every failure of the user's step is reported
        raw.error = _first_line(exc)
        text = str(exc)
        if "unscale FP16 gradients" in text:
            raw.error_kind = "fp16-grads"
        elif re.search(r"same device|on the expected device|device mismatch|different devices", text):
            raw.error_kind = "device"
        else:
            raw.error_kind = "other"
        if phase == "step":
            raw.module = probes.module_label(model, tracker.parents)
        else:
            raw.module = f"({phase})"
    return raw


def _available(device: str) -> str | None:
    """None when ``device`` can run here, else the reason it cannot."""
    if device == "cpu":
        return None
    if device == "cuda":
        return None if torch.cuda.is_available() else "no CUDA device (torch.cuda.is_available() is False)"
    if device == "mps":
        mps = getattr(torch.backends, "mps", None)
        ok = mps is not None and mps.is_available()
        return None if ok else "no MPS device (torch.backends.mps.is_available() is False)"
    return f"unknown device {device!r}"


def _module_of(model: torch.nn.Module, param: str) -> str:
    path = param.rsplit(".", 1)[0] if "." in param else ""
    if not path:
        return f"{type(model).__name__} (the model itself)"
    try:
        return f"{path} ({type(model.get_submodule(path)).__name__})"
    except AttributeError:
        return path


def _compare(raw: _Raw, ref: _Raw, tol: Tolerances, model: torch.nn.Module,
             report: Report) -> Run:
    run = Run(raw.device, raw.mode, "ok", loss=raw.loss, skipped_steps=raw.skipped_steps,
              scale=raw.scale, error=raw.error)
    if raw.error and not raw.nonfinite:
        run.status = "error"
        return run
    if raw.nonfinite:
        run.status = "non-finite"
        return run
    is_ref = raw is ref
    if is_ref:
        run.status = "reference"
        return run
    run.loss_err, loss_good = loss_ok(raw.loss, ref.loss, tol)
    bad: list[Finding] = []
    if not loss_good:
        bad.append(Finding(
            "mismatch",
            f"loss {raw.loss:.6g} differs from the cpu float32 reference {ref.loss:.6g} by "
            f"{run.loss_err:.1e} (relative), beyond rtol {tol.rtol:g} / atol {tol.atol:g}",
            f"keep the loss computation in float32, or pass looser Tolerances for {raw.mode}",
            module="loss_fn", device=raw.device, mode=raw.mode,
            details={"loss": raw.loss, "reference": ref.loss, "rel_err": run.loss_err}))
    grad_errs, coss, upd_errs = [], [], []
    for name, g_ref in ref.grads.items():
        g = raw.grads.get(name)
        if (g is None) != (g_ref is None):
            bad.append(Finding(
                "mismatch",
                f"{name} has {'no gradient' if g is None else 'a gradient'} here but "
                f"{'none' if g_ref is None else 'one'} in the cpu float32 reference",
                "make the step compute the same gradients on every device and precision",
                module=_module_of(model, name), name=name, device=raw.device, mode=raw.mode))
            continue
        if g is None:
            continue
        gc = compare_tensors(g, g_ref, tol, with_cosine=True)
        uc = compare_tensors(raw.updates[name], ref.updates[name], tol, with_cosine=False)
        grad_errs.append(gc.rel_l2)
        upd_errs.append(uc.rel_l2)
        if gc.cosine is not None:
            coss.append(gc.cosine)
        if not (gc.ok and uc.ok):
            cos = "" if gc.cosine is None else f", cosine {gc.cosine:.6f} (min {tol.cos_min:.6f})"
            bad.append(Finding(
                "mismatch",
                f"{name}: gradient relative L2 error {gc.rel_l2:.1e}{cos}, update relative L2 "
                f"error {uc.rel_l2:.1e}, beyond the {raw.mode} tolerance "
                f"(rtol {tol.rtol:g}, atol {tol.atol:g})",
                "run this module in float32 (torch.autocast(..., enabled=False) around it), "
                f"or pass looser Tolerances for {raw.mode}",
                module=_module_of(model, name), name=name, device=raw.device, mode=raw.mode,
                details={"grad_rel_l2": gc.rel_l2, "grad_cosine": gc.cosine,
                         "update_rel_l2": uc.rel_l2}))
    run.grad_err = max(grad_errs, default=None)
    run.grad_cos = min(coss, default=None)
    run.update_err = max(upd_errs, default=None)
    if bad:
        run.status = "mismatch"
        report.findings.extend(bad[:MAX_MISMATCH_FINDINGS])
        if len(bad) > MAX_MISMATCH_FINDINGS:
            report.notes.append(f"{raw.device} {raw.mode}: {len(bad) - MAX_MISMATCH_FINDINGS} "
                                "more mismatch findings not shown")
    return run


def _master_weights(step: TrainingStep) -> Finding | None:
    low = [(n, p.dtype) for n, p in step.model.named_parameters() if p.dtype in _LOW]
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
        module=_module_of(step.model, name), name=name, op="GradScaler.unscale_",
        related="DEV208", details={"count": len(low), "dtype": dt})


def _nonfinite_finding(step: TrainingStep, raw: _Raw, runs: dict, seed: int) -> Finding:
    dtype = DTYPES[raw.mode]
    try:
        nf = probes.nonfinite_probe(step, raw.device, dtype, seed, scale=raw.scale or 1.0)
    except Exception as exc:  # noqa: BLE001
        nf, why = None, _first_line(exc)
    else:
        why = "no op produced inf/NaN when replayed"
    other = "bfloat16" if raw.mode == "float16" else None
    clean = ""
    if other:
        o = runs.get((raw.device, other))
        if o is None:
            clean = ""
        elif o.error is None and not o.nonfinite:
            clean = f"; bfloat16 runs clean on {raw.device} (same exponent range as float32)"
        else:
            clean = f"; bfloat16 is not clean on {raw.device} either"
    what = "the loss is inf/NaN" if raw.error is None else raw.error
    if nf is None:
        return Finding("non-finite", f"{what} in the {raw.mode} run ({why}){clean}",
                       "find the overflowing op by running the step under torch.autograd.detect_anomaly",
                       device=raw.device, mode=raw.mode)
    ins = ", ".join(f"{d} {s} in [{lo:.3g}, {hi:.3g}]" for d, s, lo, hi in nf.inputs) or "no float inputs"
    limit = f" ({raw.mode} max {torch.finfo(dtype).max:g})" if raw.mode != "float32" else ""
    phase = "backward of " if nf.backward else ""
    if nf.inputs_finite:
        msg = (f"{what} in the {raw.mode} run: the first op whose output is inf/NaN is {phase}{nf.op} in "
               f"{nf.module}, output {nf.out_dtype}, inputs {ins}{limit}{clean}")
    else:
        msg = (f"{what} in the {raw.mode} run: {phase}{nf.op} in {nf.module} already receives inf/NaN "
               f"(from the batch or a parameter), inputs {ins}{clean}")
    fix = ("use dtype=torch.bfloat16 in autocast, scale values down before this op, or run it in "
           "float32 with torch.autocast(..., enabled=False)")
    if raw.mode == "float32":
        fix = "keep this op's inputs in its domain (no log of negatives, no 0/0)"
    return Finding("non-finite", msg, fix, module=nf.module, op=nf.op, device=raw.device,
                   mode=raw.mode, details={"inputs": [list(i) for i in nf.inputs],
                                           "backward": nf.backward, "out_dtype": nf.out_dtype})


def _underflow_finding(step, device, seed, ref: _Raw, scaled: _Raw, tol: Tolerances) -> Finding | None:
    raw = _run(step, device, "float16", seed, scaled=False)
    if raw.error or raw.nonfinite:
        return None
    total = lost = kept = 0
    worst, worst_frac = None, 0.0
    for name, g32 in ref.grads.items():
        g16 = raw.grads.get(name)
        if g32 is None or g16 is None:
            continue
        mask = (g16 == 0) & (g32 != 0)
        n = int(mask.sum())
        total += g32.numel()
        lost += n
        gs = scaled.grads.get(name) if scaled.grads else None
        if gs is not None:
            kept += int((mask & (gs != 0)).sum())
        if n / g32.numel() > worst_frac:
            worst, worst_frac = name, n / g32.numel()
    frac = lost / total if total else 0.0
    if frac <= tol.underflow:
        return None
    saved = ""
    if scaled.scale is not None:
        saved = f"; GradScaler at scale {scaled.scale:g} keeps {kept} of them"
    return Finding(
        "underflow",
        f"{frac:.1%} of gradient elements ({lost} of {total}) are zero in float16 without loss "
        f"scaling but non-zero in float32; worst {worst} ({worst_frac:.1%}){saved}",
        "use torch.amp.GradScaler with float16, or autocast to bfloat16",
        module=_module_of(step.model, worst), name=worst, op="float16 backward", device=device,
        mode="float16", details={"fraction": frac, "lost": lost, "total": total, "kept_by_scaler": kept})


def _deprecations(caught) -> list[Finding]:
    out, seen = [], set()
    for w in caught:
        if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
            continue
        if os.path.abspath(w.filename).startswith(_HERE):
            continue
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


def _check(step, devices, modes, tolerances, seed, extra_warnings=()) -> Report:
    if not isinstance(step, TrainingStep):
        raise TypeError(f"check_step needs a TrainingStep, got {type(step).__name__}")
    modes = list(dict.fromkeys(modes or MODES))
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r}; use one of {', '.join(MODES)}")
    devices = list(dict.fromkeys(["cpu", *(devices or DEVICES)]))
    for d in devices:
        if d not in DEVICES:
            raise ValueError(f"unknown device {d!r}; use one of {', '.join(DEVICES)}")
    tols = resolve_tolerances(tolerances)
    report = Report(step.name, seed, torch.__version__)
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        warnings.simplefilter("always", FutureWarning)
        mw = _master_weights(step)
        if mw:
            report.findings.append(mw)
        probe_findings, note = probes.device_probe(step)
        report.findings.extend(probe_findings)
        if note:
            report.notes.append(note)
        raws: dict[tuple[str, str], _Raw] = {}
        ref = raws[("cpu", "float32")] = _run(step, "cpu", "float32", seed)
        for device in devices:
            reason = _available(device)
            if reason:
                report.runs.append(Run(device, "-", "skipped", error=reason))
                continue
            for mode in ["float32", *(m for m in modes if m != "float32")]:
                if mode == "float32" and device != "cpu" and "float32" not in modes:
                    continue
                raw = raws.get((device, mode)) or _run(step, device, mode, seed)
                raws[(device, mode)] = raw
        broken = ref.error or ref.nonfinite
        if ref.error:
            report.findings.append(Finding(
                "step-error", f"the cpu float32 reference run raised {ref.error}",
                "make the step run in float32 on the cpu first; nothing else can be compared",
                module=ref.module, device="cpu", mode="float32"))
        for (device, mode), raw in raws.items():
            if broken:
                status = "error" if raw.error else ("non-finite" if raw.nonfinite else "not compared")
                report.runs.append(Run(device, mode, status, loss=raw.loss, error=raw.error,
                                       skipped_steps=raw.skipped_steps, scale=raw.scale))
                if raw is ref and raw.nonfinite:
                    report.findings.append(_nonfinite_finding(step, raw, raws, seed))
                continue
            report.runs.append(_compare(raw, ref, tols[mode], step.model, report))
            if raw.nonfinite:
                report.findings.append(_nonfinite_finding(step, raw, raws, seed))
            elif raw.error_kind == "device":
                if probe_findings:
                    report.runs[-1].error += " (see the device-placement findings)"
                else:
                    op = re.search(r"wrapper_\w+?__?(\w+)\)", raw.error)
                    report.findings.append(Finding(
                        "device-placement", f"the step raises a device mismatch on {device}: {raw.error}",
                        "move every tensor the step uses with .to(device), or create it with device=",
                        module=raw.module, op=f"aten.{op.group(1)}" if op else None,
                        device=device, mode=mode))
            elif raw.error_kind == "fp16-grads" and mw:
                report.runs[-1].error += " (see the master-weights finding)"
            elif raw.error and raw is not ref:
                report.findings.append(Finding(
                    "step-error", f"the step raised {raw.error} on {device} {mode}",
                    f"run the step on {device} in {mode} directly to see the traceback",
                    module=raw.module, device=device, mode=mode))
            if mode == "float16" and raw.error is None and not raw.nonfinite:
                uf = _underflow_finding(step, device, seed, ref, raw, tols["float16"])
                if uf:
                    report.findings.append(uf)
    report.findings.extend(_deprecations([*extra_warnings, *caught]))
    for w in caught:
        if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    order = {d: i for i, d in enumerate(DEVICES)}
    morder = {m: i for i, m in enumerate(MODES)}
    report.runs.sort(key=lambda r: (order.get(r.device, 9), morder.get(r.mode, 9)))
    return report


def check_step(step: TrainingStep, devices=None, modes=None, tolerances=None, seed: int = 0) -> Report:
    """Replay ``step`` on every device and precision, compare with float32 on the CPU, explain.

    Runs, each on a deep copy of ``step.model`` with a fresh optimizer and ``torch.manual_seed
    (seed)`` (``step.model`` itself is never mutated, and the caller's RNG state is restored):

    - per device: ``float32``; ``bfloat16`` under ``torch.autocast``; ``float16`` under
      ``torch.autocast`` with ``torch.amp.GradScaler(device)``. The float16 run retries the
      step from the same weights up to :data:`MAX_SCALER_STEPS` times while the scaler skips
      steps (inf/NaN gradients) and lowers its scale; skipped steps are reported, not failures.
      A non-finite loss ends the run at once.
    - the CPU always; CUDA and MPS when present, else listed as skipped with the reason.
    - one more forward and backward on the ``meta`` device to find device placement bugs
      without a GPU (:func:`devlint.runtime.probes.device_probe`).

    Each run is compared with the CPU float32 run: the loss, and per parameter the gradient
    (relative L2 error and cosine) and the update ``params_after - params_before`` (relative
    L2 error), all in float32 on the CPU, under :class:`Tolerances`.

    Args:
        step: the :class:`TrainingStep`.
        devices: device types to try, from ``"cpu"``, ``"cuda"``, ``"mps"``; default all three.
            The CPU is always included.
        modes: precision modes from ``"float32"``, ``"bfloat16"``, ``"float16"``; default all.
            The CPU float32 reference always runs.
        tolerances: ``None`` (defaults, see :class:`Tolerances`), one :class:`Tolerances` for
            every mode, or a dict mode -> :class:`Tolerances`.
        seed: the RNG seed set before every run.

    Returns:
        a :class:`Report`; ``report.ok`` is True when every run that ran is within tolerance
        and there are no findings.

    Raises:
        TypeError: ``step`` is not a :class:`TrainingStep`, or bad ``tolerances``.
        ValueError: an unknown device or mode name.
    """
    return _check(step, devices, modes, tolerances, seed)
