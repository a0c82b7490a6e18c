"""Replay a :class:`TrainingStep` per device and mode, judge each run, explain, build the report.

Order of work (the cost is a few plain steps, see docs/runtime.md "Cost"):

1. The CPU float32 reference runs on the stand-in device (:mod:`devlint.runtime.standin`):
   one run gives the reference numbers *and* the device-placement check. If the stand-in
   cannot finish, the reference is rerun plainly and the report says why (not ok).
2. Every other run is compared with it as it finishes (streamed: only per-parameter numbers
   are kept) by :func:`devlint.runtime.compare.measure`.
3. A low-precision run whose errors are beyond a few unit roundoffs is judged against a
   calibrated noise floor: the same step in float32 with only that dtype's rounding.
4. Failures are explained by diagnostic replays (:mod:`devlint.runtime.probes`).
"""

from __future__ import annotations

import re
import warnings

import torch

from . import autocast_policy, by_module, conditioning, emulate, settle, standin
from .buffers import judge_state
from .cufft import gpu_fft_refusal
from .compare import DTYPES, Rounding, Tolerances, Verdict, judge, needs_floor, resolve_tolerances
from .devices import unavailable as _available
from .dtype_origin import dtype_error_origin
from .gpu_dtypes import float32_fix, low_precision_refusal
from .explain import (cause_first, deprecations, master_weights, mismatch_finding, nonfinite_finding,
                      placement_findings, region_note, state_findings, underflow_finding)
from .replay import INIT_SCALE, MAX_HALVINGS, Raw, every_scale_skipped, run_once
from .report import Finding, Report, Run
from .scaler_lifetime import fresh_scaler_finding
from .step import TrainingStep, eager, fixed_reseed, host_rng_kept
from .workcopy import WorkingCopy

__all__ = ["check_step", "MODES", "DEVICES", "MAX_HALVINGS", "INIT_SCALE"]

MODES = ("float32", "bfloat16", "float16")
DEVICES = ("cpu", "cuda", "mps")
#: A low-precision run that raised on mixed dtypes (``scatter_`` / ``index_put_`` / ``addmm``
#: of a float32 buffer and an autocast output, as HF BigBird's block-sparse attention).
_DTYPE_ERR = re.compile(r"dtype to be equal|same dtype|expected scalar type|dtypes? (must |to )?match"
                        r"|but found (Float|BFloat16|Half)|Found dtype|expected both .* dtype", re.I)

#: A Python constant a low-precision tensor cannot hold (``masked_fill(mask, -1e9)`` on float16).
_OUT_OF_RANGE = re.compile(r"cannot be converted to type .* without overflow")


class _Stopped(Exception):
    """A try of the replayed scale search raised or went non-finite: that try is the run."""

    def __init__(self, raw: Raw):
        super().__init__(raw.error)
        self.raw = raw


def _settled(step, device, mode, seed, ref, kernels: str = "emulated", bench=None) -> Raw:
    """The float16 run with the GradScaler settled: the first scale 2**16 / 2**k (k <= 24)
    whose step is not skipped (:func:`settle.least_finite`, starting from the halvings the
    reference's largest gradient suggests, :func:`settle.hint`); ``skipped_steps = k``. With
    the built-in step the search runs on one forward graph (backward passes only,
    :mod:`settle`)."""
    guess = settle.hint(_grad_max(ref), INIT_SCALE)
    raw = run_once(step, device, mode, seed, ref=ref, kernels=kernels, bench=bench,
                   on_graph=step.step_fn is None, guess=guess)
    if step.step_fn is None and raw.error and raw.error_kind == "other":
        # a graph that cannot be backpropagated twice (a checkpoint that frees what it
        # recomputes): replay the step per try instead
        raw = run_once(step, device, mode, seed, ref=ref, kernels=kernels, bench=bench)
    elif step.step_fn is None and (raw.errors is not None or raw.error or raw.nonfinite):
        return raw
    if raw.skipped_steps is None:
        if raw.scale is not None:
            raw.skipped_steps = 0
        return raw
    trials: dict[int, Raw] = {}

    def finite(k: int) -> bool:
        trial = run_once(step, device, mode, seed, ref=ref, init_scale=INIT_SCALE / 2 ** k,
                         kernels=kernels, bench=bench)
        if trial.error or trial.nonfinite:
            raise _Stopped(trial)
        trials[k] = trial
        return trial.skipped_steps is None

    try:
        k = settle.least_finite(finite, MAX_HALVINGS, guess, first_overflows=True, redo=False)
    except _Stopped as stop:
        return stop.raw
    if k is None:
        return every_scale_skipped(raw)
    trials[k].skipped_steps = k
    return trials[k]


def _grad_max(ref: Raw) -> float:
    """The largest absolute element of the reference's gradients (0.0 without any), kept
    on ``ref`` after the first call."""
    if ref.grad_max is None:
        grads = [g for g in ref.grads.values() if g is not None and g.numel()]
        ref.grad_max = float(torch.stack(torch._foreach_norm(grads, float("inf"))).max()) if grads else 0.0
    return ref.grad_max


class Floors:
    """The noise-floor runs of one device's low-precision runs, measured once each.

    ``lowp`` holds those runs (all finished before any is judged), so the bfloat16 judgement
    can see whether the float16 run needs its floor too. When both do, bfloat16 is judged
    first against the float16 floor: rounding to float16 moves every value in its normal range
    by at most 2**-11 of it, to bfloat16 by 2**-8, so the float16 floor is the smaller one
    (bfloat16 / float16 floors measured on the zoo: 1.0 for nn.Transformer to 53 for T5) and a
    run within ``k`` times it is within ``k`` times its own. Only when bfloat16 fails that is
    its own floor run: a BatchNorm model needing both floors pays one floor run instead of two.
    """

    def __init__(self, step, ref: Raw, seed: int, bench, lowp: dict, tols: dict):
        self.step, self.ref, self.seed, self.bench = step, ref, seed, bench
        self.lowp, self.tols = lowp, tols
        self.runs: dict[str, Raw] = {}

    def get(self, mode: str) -> Raw:
        """The float32 run with ``mode``'s rounding (:func:`replay.run_once` ``round_to``)."""
        if mode not in self.runs:
            self.runs[mode] = run_once(self.step, self.ref.device, "float32", self.seed, ref=self.ref,
                                       round_to=mode, bench=self.bench)
        return self.runs[mode]

    def smaller(self, raw: Raw) -> Raw | None:
        """For a bfloat16 run whose gradients need a floor: the float16 floor when the float16
        run of the same device needs one too (else None: no run is added for it)."""
        f16 = self.lowp.get("float16")
        if raw.mode != "bfloat16" or f16 is None or f16.error or f16.nonfinite or f16.errors is None \
                or not needs_floor(f16.errors, "float16", self.tols["float16"]):
            return None
        floor = self.get("float16")
        return floor if floor.errors is not None else None


def _judge_run(step, raw: Raw, ref: Raw, tol: Tolerances, seed: int, cross_device: bool,
               bench=None, floors: Floors | None = None) -> tuple[Verdict, list]:
    """Judge a finished run: its gradients (:func:`compare.judge`) and buffers
    (:func:`buffers.judge_state`, ``(name, error, limit)`` of those beyond tolerance); the
    noise floor is measured first when either exceeds the quick bound, then the wide floors
    while either is beyond it. ``floors``: the device's shared floor runs (:class:`Floors`)."""
    if raw.mode == "float32":
        return judge(raw.errors, "float32", tol, adaptive=raw.adaptive,
                     fixed_rtol=tol.float32_rtol if (cross_device or step.step_fn) else 1e-5), []
    grads_quick = not needs_floor(raw.errors, raw.mode, tol)
    quick = judge(raw.errors, raw.mode, tol, adaptive=raw.adaptive) if grads_quick else None
    state = judge_state(raw.errors.state, raw.mode, tol)
    if grads_quick and not state:
        return quick, []
    smaller = floors.smaller(raw) if floors is not None and not state else None
    if smaller is not None:
        verdict = judge(raw.errors, raw.mode, tol, floor=smaller.errors, adaptive=raw.adaptive)
        if verdict.ok:
            raw.floor_errors = smaller.errors
            verdict.how += " (the float16 floor, smaller than bfloat16's: no bfloat16 floor run needed)"
            return verdict, []
    floor = floors.get(raw.mode) if floors is not None else \
        run_once(step, ref.device, "float32", seed, ref=ref, round_to=raw.mode, bench=bench)
    raw.floor_errors = None if grads_quick else floor.errors  # only the gradients use it there
    if floor.errors is None:
        return quick or judge(raw.errors, raw.mode, tol, adaptive=raw.adaptive), []
    # one perturbation is one sample of how many kinks get crossed: then a second, twice as
    # wide (measured: Reformer's LSH buckets failed the first at 4 of 25 seeds, by <= 1.31x)
    wide, scale = None, None
    for scale in (None, tol.k, 2 * tol.k):
        if scale is not None:
            run = run_once(step, ref.device, "float32", seed, ref=ref, round_to=Rounding(raw.mode, scale),
                       bench=bench)
            if run.errors is None:
                break
            wide = run.errors
        verdict = quick or judge(raw.errors, raw.mode, tol, floor=floor.errors, adaptive=raw.adaptive,
                                 wide_floor=wide, wide_scale=scale if scale != tol.k else None)
        state = judge_state(raw.errors.state, raw.mode, tol, floor.errors.state,
                            wide.state if wide is not None else None) if state else []
        if verdict.ok and not state:
            break
    if not verdict.ok and quick is None:  # the failure path only: is it the gradient's own?
        def rejudge(drop, wide=wide, scale=scale):
            w = conditioning.without
            return judge(w(raw.errors, drop), raw.mode, tol, floor=w(floor.errors, drop), adaptive=raw.adaptive,
                         wide_floor=w(wide, drop), wide_scale=scale if scale != tol.k else None)
        verdict = conditioning.confirm(step, raw, ref, seed, verdict, rejudge, run_once, bench)
    return verdict, state


def _check(step, devices, modes, tolerances, seed, extra_warnings=(), world_size=None,
           target=None, cpu_kernels: str = "auto", policy: str = "cuda", joined=None) -> Report | None:
    """:func:`check_step`, with the warnings raised while loading the step, the target it came
    from (every rank loads it), and ``joined``: the torchrun job this process is a rank of
    (:mod:`devlint.runtime.torchrun`); None on its ranks other than 0."""
    if not isinstance(step, TrainingStep):
        raise TypeError(f"check_step needs a TrainingStep, got {type(step).__name__}")
    if policy not in autocast_policy.POLICIES:
        raise ValueError(f"unknown autocast policy {policy!r}; use one of {', '.join(autocast_policy.POLICIES)}")
    modes = list(dict.fromkeys(modes or MODES))
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r}; use one of {', '.join(MODES)}")
    devices = list(dict.fromkeys(["cpu", *(devices or DEVICES)]))
    for d in devices:
        if d not in DEVICES:
            raise ValueError(f"unknown device {d!r}; use one of {', '.join(DEVICES)}")
    step, compiled = eager(step)
    cpu_kernels = emulate.resolve(cpu_kernels, step.model, policy)
    tols = resolve_tolerances(tolerances)
    dist, dist_caught = None, []
    if world_size is not None:  # first: its ranks fork from this process before CUDA starts here
        from .distributed import for_check_step

        dist, dist_caught = for_check_step(step, devices, seed, world_size, target, joined, policy, cpu_kernels)
        if dist is None:  # a torchrun rank other than 0: rank 0 reports
            return None
    report = Report(step.name, seed, torch.__version__, cpu_kernels=cpu_kernels, autocast_policy=policy)
    report.notes += [compiled] if compiled else []
    lowp = policy if set(modes) - {"float32"} else "cpu"  # no autocast run: nothing to register
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda), host_rng_kept(), fixed_reseed(), \
            warnings.catch_warnings(record=True) as caught, autocast_policy.policy(lowp):
        warnings.simplefilter("always", DeprecationWarning)
        warnings.simplefilter("always", FutureWarning)
        _check_into(report, step, devices, modes, tols, seed, cpu_kernels)
    if dist is not None:
        report.runs += dist.runs
        report.findings += dist.findings
        report.notes += dist.notes
    report.findings.extend(deprecations([*extra_warnings, *dist_caught, *caught]))
    report.findings = cause_first(report.findings, step)
    for w in caught:
        if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    order = {d: i for i, d in enumerate(DEVICES)}
    morder = {m: i for i, m in enumerate(MODES)}
    report.runs.sort(key=lambda r: (order.get(r.device, 9), morder.get(r.mode, 9)))
    return report


def _check_into(report: Report, step, devices, modes, tols, seed, kernels: str = "emulated") -> None:
    mw = master_weights(step)
    if mw:
        report.findings.append(mw)
    bench = WorkingCopy(step.model)
    ref = run_once(step, "cpu", "float32", seed, keep=True, stand_in=True, bench=bench)
    placement = placement_findings(ref, step)
    report.findings.extend(placement)
    if ref.error:
        plain = run_once(step, "cpu", "float32", seed, keep=True, bench=bench)
        limit = ref.error.startswith(standin.StandInUnsupported.__name__)  # devlint's, not the step's
        if plain.error is None and not plain.nonfinite and not placement:
            report.findings.append(Finding(
                "probe-incomplete",
                f"the device-placement check (the step on a stand-in GPU) could not finish: "
                f"{ref.error}, in {ref.module}" + ("" if limit else "; placement is unchecked"),
                "check the step on a real GPU, or report this to devlint",
                module=ref.module, device="stand-in", mode="float32",
                severity="info" if limit else "error"))
        ref = plain
    runs: dict[tuple[str, str], Raw] = {("cpu", "float32"): ref}
    broken = bool(ref.error or ref.nonfinite)
    if ref.error:
        kind = "the step called sys.exit" if ref.error_kind == "exit" else "the cpu float32 reference run raised"
        report.findings.append(Finding(
            "step-error", f"{kind}: {ref.error}" if ref.error_kind != "exit" else ref.error,
            "make the step run in float32 on the cpu first; nothing else can be compared",
            module=ref.module, op=ref.op, device="cpu", mode="float32",
            details={"exit": ref.error_kind == "exit"}))
    report.runs.append(Run("cpu", "float32", "reference" if not broken else
                           ("error" if ref.error else "non-finite"), loss=ref.loss, error=ref.error))
    if ref.nonfinite:
        report.findings.append(nonfinite_finding(step, ref, runs, seed))
    elif ref.state_nonfinite:
        report.findings.extend(state_findings(step, ref, [], seed))
    for device in devices:
        reason = _available(device)
        if reason:
            report.runs.append(Run(device, "-", "skipped", error=reason))
            continue
        dev_ref = ref
        pending: list = []  # (low-precision run, its reference, compared across devices)
        for mode in ["float32", *(m for m in modes if m != "float32")]:
            if device == "cpu" and mode == "float32":
                continue
            if mode == "float32" and device != "cpu" and "float32" not in modes and not ref.rng_used:
                continue
            if broken:
                report.runs.append(Run(device, mode, "not compared",
                                       error="the cpu float32 reference failed"))
                continue
            cross = device != "cpu"
            if cross and mode == "float32" and ref.rng_used:
                # Dropout masks differ between the CPU and this device's generator: this
                # device's own float32 run becomes the reference of its other runs.
                dev_ref = run_once(step, device, "float32", seed, keep=True)
                runs[(device, mode)] = dev_ref
                report.runs.append(Run(device, mode, "not compared", loss=dev_ref.loss, error=(
                    "the step draws random numbers (dropout) and the CPU and "
                    f"{device} generators differ; {device} runs are compared with this run")))
                if dev_ref.error or dev_ref.nonfinite:
                    report.runs[-1] = _row(step, dev_ref, ref, tols[mode], seed, True, report, runs)
                    dev_ref = ref
                continue
            if mode == "float16":
                raw = _settled(step, device, mode, seed, dev_ref, kernels, bench)
            else:
                raw = run_once(step, device, mode, seed, ref=dev_ref, kernels=kernels, bench=bench)
            runs[(device, mode)] = raw
            pending.append((raw, dev_ref, cross and dev_ref is ref))
        # every low-precision run first, then the judgements in mode order: see Floors
        floors = {}
        for raw, r, c in pending:
            if id(r) not in floors:
                floors[id(r)] = Floors(step, r, seed, bench, {x.mode: x for x, y, _ in pending if y is r}, tols)
            report.runs.append(_row(step, raw, r, tols[raw.mode], seed, c, report, runs, bench, floors[id(r)]))


def _row(step, raw: Raw, ref: Raw, tol: Tolerances, seed: int, cross: bool, report: Report,
         runs: dict, bench=None, floors: Floors | None = None) -> Run:
    run = Run(raw.device, raw.mode, "ok", loss=raw.loss, skipped_steps=raw.skipped_steps,
              scale=raw.scale, error=raw.error, kernels=raw.kernels, policy=raw.policy)
    if region_note(raw):
        report.notes.append(region_note(raw))
    if raw.error_kind == "unsupported":
        refused = gpu_fft_refusal(step, DTYPES[raw.mode], seed, kernels=raw.kernels or "emulated") \
            if raw.device == "cpu" and raw.policy == "cuda" else None
        if refused is not None and refused.missing:  # no kernel on a GPU either: a note, as there
            run.status = "unsupported"
            report.notes.append(f"{raw.device} {raw.mode} not checked: {refused.op} has no {raw.mode} kernel on "
                                f"{raw.device}, and {refused.reason} ({raw.error})")
            return run
        if refused is not None:  # the CPU has no such kernel, and a GPU raises for these sizes
            run.status = "error"
            report.findings.append(Finding(
                "step-error", f"{refused.op} on a {refused.dtype} input fails on a GPU: {refused.reason} "
                f"(the cpu raised {raw.error})",
                "compute the transform in float32: torch.fft.*(x.float()), and cast back after the inverse",
                module=refused.module, op=refused.op, device=raw.device, mode=raw.mode))
            return run
        shared = low_precision_refusal(step, raw, seed) if raw.device == "cpu" and raw.policy == "cuda" else None
        if shared is not None:  # no such kernel on a GPU either, and no autocast cast there
            run.status = "error"
            report.findings.append(shared)
            return run
        run.status = "unsupported"
        report.notes.append(f"{raw.device} {raw.mode} not checked: an op has no {raw.mode} kernel on "
                            f"{raw.device} ({raw.error})")
        return run
    if raw.nonfinite:
        run.status = "non-finite"
        report.findings.append(nonfinite_finding(step, raw, runs, seed))
        return run
    if raw.error:
        run.status = "error"
        if raw.error_kind == "device":
            if any(f.kind == "device-placement" for f in report.findings):
                run.error += " (see the device-placement findings)"
            else:
                report.findings.append(Finding(
                    "device-placement", f"the step fails on {raw.device} with a device mismatch: "
                    f"{raw.error}", "move every tensor the step uses with .to(device), or create it "
                    "with device=", module=raw.module, device=raw.device, mode=raw.mode))
        elif any(f.kind == "master-weights" for f in report.findings):
            run.error += " (see the master-weights finding)"
        elif raw.error_kind == "scaler-update":
            report.findings.append(Finding(
                "step-error", f"{raw.error} ({raw.device} {raw.mode})",
                "call scaler.update() once per step, right after scaler.step(optimizer)",
                module=raw.module, op="GradScaler.update", device=raw.device, mode=raw.mode,
                related="DEV204"))
        elif raw.error_kind == "scaler-step":
            report.findings.append(Finding(
                "step-error", f"{raw.error} ({raw.device} {raw.mode})",
                raw.fix or "step with scaler.step(optimizer) instead of optimizer.step(), then scaler.update()",
                module=raw.module, op=raw.op, device=raw.device, mode=raw.mode, related=raw.related or "DEV203"))
        elif raw.error_kind == "exit":
            report.findings.append(Finding(
                "step-error", f"{raw.error} on {raw.device} {raw.mode}", "raise an exception instead "
                "of exiting", module=raw.module, device=raw.device, mode=raw.mode, details={"exit": True}))
        elif raw.error.startswith(autocast_policy.BannedUnderAutocast.__name__):
            report.findings.append(Finding(
                "step-error", f"the step raised {raw.error} on {raw.device} {raw.mode}",
                "compute the loss from logits with F.binary_cross_entropy_with_logits "
                "(nn.BCEWithLogitsLoss), not sigmoid then binary_cross_entropy",
                module=raw.module, op="aten.binary_cross_entropy", device=raw.device, mode=raw.mode))
        elif raw.mode != "float32" and _DTYPE_ERR.search(raw.error):
            fix = ("decorate its forward with @torch.amp.custom_fwd(device_type=...) and its backward "
                   "with @torch.amp.custom_bwd" if raw.op else
                   "cast one operand to the other's dtype there (.to(x.dtype)), or run that code "
                   "under torch.autocast(..., enabled=False) on .float() inputs")
            said, origin = "", None
            if raw.op is None:  # not raised inside a custom Function: which op, and whose operand
                origin = dtype_error_origin(step, raw.device, DTYPES[raw.mode], seed, kernels=raw.kernels or "emulated")
            if origin is not None:
                raw.op = origin.op
                if raw.module in (None, "loss_fn (outside the model)"):  # raised in backward
                    raw.module = origin.module
                if origin.function is not None:
                    said = (f"; its {origin.dtype_out} operand is the output of {origin.function}, a "
                            f"custom torch.autograd.Function that returns {origin.dtype_out} for a "
                            f"{origin.dtype_in} input")
                    fix = f"return the output of {origin.function}.forward in its input's dtype (.to(x.dtype))"
            report.findings.append(Finding(
                "step-error", f"the step raised {raw.error} on {raw.device} {raw.mode}: an op met "
                f"a float32 tensor and autocast's {raw.mode} output (the float32 run passes){said}",
                fix,
                module=raw.module, op=raw.op, device=raw.device, mode=raw.mode))
        else:
            said, fix = "", raw.fix or f"run the step on {raw.device} in {raw.mode} directly to see the traceback"
            if raw.mode != "float32" and raw.op is None:  # the float32 run passed: which op refused
                origin = dtype_error_origin(step, raw.device, DTYPES[raw.mode], seed, kernels=raw.kernels or "emulated")
                if origin is not None:
                    raw.op = origin.op
                    if raw.module in (None, "loss_fn (outside the model)"):
                        raw.module = origin.module
                    said = f" at {origin.op} in {origin.module} (the float32 run passes)"
                    if _OUT_OF_RANGE.search(raw.error):
                        fix = (f"a constant beyond {raw.mode}'s range meets a {raw.mode} tensor at {origin.op}: "
                               "use torch.finfo(x.dtype).min (or .max) instead, or compute it in float32")
                    fix = float32_fix(origin.api, raw.error) or fix
            report.findings.append(Finding(
                "step-error", f"the step raised {raw.error} on {raw.device} {raw.mode}{said}", fix,
                module=raw.module, op=raw.op, device=raw.device, mode=raw.mode))
        return run
    verdict, beyond = _judge_run(step, raw, ref, tol, seed, cross, bench, floors)
    run.loss_err, run.grad_err, run.floor = verdict.loss_err, verdict.grad_err, verdict.floor
    run.update_err, run.how, run.excluded = verdict.update_err, verdict.how, verdict.excluded
    raw.ok = verdict.ok
    report.notes += verdict.notes
    run.modules = by_module.module_rows(step.model, raw.errors, raw.floor_errors, tol, raw.mode,
                                        ref.grads if raw.mode == "float16" else None, ref.norms)
    if not verdict.ok:
        run.status = "mismatch"
        if raw.scaled_autograd_grad:  # the cause, before the mismatch it makes
            report.findings.append(Finding(
                "mismatch", "the step takes torch.autograd.grad of scaler.scale(...): those gradients are "
                f"multiplied by the loss scale (scaler.get_scale(), {raw.scale or INIT_SCALE:g} here), and "
                f"this {raw.mode} run is beyond tolerance (the scaler is off in the other modes)",
                "divide the gradients torch.autograd.grad returns by scaler.get_scale() before using them "
                "(a gradient penalty), as PyTorch's AMP examples do",
                module="step_fn (the training step)", op="torch.autograd.grad", device=raw.device, mode=raw.mode))
        report.findings.append(mismatch_finding(step, raw, verdict, seed, tol))
    if raw.mode != "float32" and raw.errors is not None:
        known = {f.name for f in report.findings if f.kind == "non-finite"}
        buffers = [f for f in state_findings(step, raw, beyond, seed) if f.name not in known]
        if buffers:
            run.status, raw.ok = "mismatch", False
            report.findings.extend(buffers)
    if raw.mode == "float16":
        uf = underflow_finding(step, raw, ref, tol)
        if uf:
            report.findings.append(uf)
        fresh = fresh_scaler_finding(raw)
        if fresh:
            report.findings.append(fresh)
            if fresh.severity == "error":
                run.status, raw.ok = "error", False
    return run


def check_step(step: TrainingStep, devices=None, modes=None, tolerances=None, seed: int = 0,
               world_size: int | None = None, cpu_kernels: str = "auto",
               autocast_policy: str = "cuda") -> Report:
    """Replay ``step`` on every device and precision, judge each run, explain what breaks.

    Runs, each on a deep copy of ``step.model`` with a fresh optimizer and
    ``torch.manual_seed(seed)`` (``step.model`` itself is never mutated, and the caller's RNG
    state is restored):

    - the CPU float32 reference, on a stand-in GPU that carries real data
      (:mod:`devlint.runtime.standin`): the same numbers as a plain CPU run, plus every op
      that would mix CPU and GPU tensors (``device-placement`` findings);
    - per device: ``bfloat16`` under ``torch.autocast``; ``float16`` under ``torch.autocast``
      with ``torch.amp.GradScaler``, its scale settled first (bisection over at most
      :data:`MAX_HALVINGS` halvings; skipped steps are reported, not failures); ``float32``
      on a device other than the CPU;
    - the CPU always; CUDA and MPS when present, else listed as skipped with the reason.

    Each run is judged against the reference by :mod:`devlint.runtime.compare`: relative
    gradient errors per parameter, calibrated against the dtype's noise floor on this model,
    scale-free, negligible-gradient parameters left out, updates judged only for optimizers
    linear in the gradient. When the step draws random numbers (dropout), runs on CUDA/MPS
    are judged against that device's own float32 run (generators differ across devices).

    Args:
        step: the :class:`TrainingStep`.
        devices: device types to try, from ``"cpu"``, ``"cuda"``, ``"mps"``; default all three.
            The CPU is always included.
        modes: precision modes from ``"float32"``, ``"bfloat16"``, ``"float16"``; default all.
            The CPU float32 reference always runs.
        tolerances: ``None`` (defaults, see :class:`Tolerances`), one :class:`Tolerances` for
            every mode, or a dict mode -> :class:`Tolerances`.
        seed: the RNG seed set before every run.
        world_size: also run the step under DDP (and FSDP) on this many processes and compare
            with one process (:func:`devlint.runtime.distributed.check_distributed`: gloo on
            the CPU, NCCL on CUDA); its rows, findings and notes join the report.
        cpu_kernels: how the CPU bfloat16/float16 runs compute GEMMs and convolutions:
            ``"emulated"`` in float32 from the low-precision operands, the result rounded
            once to the dtype, i.e. a GPU tensor-core GEMM's arithmetic
            (:mod:`devlint.runtime.emulate`; CPUs without bf16/fp16 matrix units run the
            native kernels ~30x slower than float32); ``"native"``: PyTorch's own CPU
            kernels; ``"auto"`` (default): emulated when the model's largest parameter has
            at least :data:`devlint.runtime.emulate.AUTO_MIN_ELEMENTS` elements or, under
            CUDA's autocast rules, the model has a convolution; else native
            (:func:`devlint.runtime.emulate.resolve`).
            Every other op runs natively either way. The choice made is in
            ``Report.cpu_kernels`` and each CPU low-precision row's ``Run.kernels``.
        autocast_policy: whose autocast rules the CPU bfloat16/float16 runs follow:
            ``"cuda"`` (default: they stand in for a CUDA GPU, so each op is cast as
            ``torch.autocast("cuda")`` casts it, :mod:`devlint.runtime.autocast_policy`) or
            ``"cpu"`` (PyTorch's CPU autocast, for training with CPU autocast). Real GPU rows
            always use their device's own autocast. In ``Report.autocast_policy`` and each
            low-precision row's ``Run.policy``.

    Returns:
        a :class:`Report`; ``report.ok`` is True when every run that ran is within tolerance
        (or unsupported on that device) and no finding is an error.

    Raises:
        TypeError: ``step`` is not a :class:`TrainingStep`, or bad ``tolerances``.
        ValueError: an unknown device or mode name, ``cpu_kernels`` or ``autocast_policy`` value,
            ``world_size < 2``, or a batch that cannot be split over ``world_size`` ranks.
    """
    return _check(step, devices, modes, tolerances, seed, world_size=world_size,
                  cpu_kernels=cpu_kernels, policy=autocast_policy)
