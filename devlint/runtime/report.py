"""What :func:`devlint.runtime.check_step` returns: runs, findings, a text table and JSON."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

__all__ = ["Run", "Finding", "Report", "run_label", "legend", "seed_words", "STAND_IN_RUN", "STAND_IN_WORDS"]


@dataclass
class Run:
    """One replay of the step on one device in one precision mode, compared with the reference.

    Attributes:
        device: ``"cpu"``, ``"cuda"`` or ``"mps"``.
        mode: ``"float32"``, ``"bfloat16"`` (autocast) or ``"float16"`` (autocast and
            ``torch.amp.GradScaler``); ``"-"`` on a row for a device that is not present.
        status: ``"reference"`` (the CPU float32 run everything is compared with), ``"ok"``,
            ``"mismatch"`` (gradients, updates or buffers beyond tolerance, or a buffer
            inf/NaN), ``"non-finite"`` (inf/NaN loss or gradients), ``"error"`` (the step
            raised), ``"unsupported"`` (an op has no kernel for this dtype on this device: not
            the model's fault, not counted), ``"not compared"``
            (the reference itself failed, or float32 across devices with random draws), or
            ``"skipped"`` (device not present).
        loss: the loss value of the step (float, unitless), ``None`` when not computed.
        loss_err: ``|loss - loss_ref| / |loss_ref|``.
        grad_err: the whole-model gradient relative L2 error ``||g - g_ref|| / ||g_ref||``
            over the judged parameters (see :class:`devlint.runtime.compare.Tolerances`).
        floor: the same error for the noise-floor run (float32 with only this dtype's
            rounding), when it was measured; ``None`` when the run passed without it.
        update_err: the largest per-parameter update relative L2 error, or, for adaptive
            optimizers (not judged), the largest update error RMS in units of lr.
        skipped_steps: float16 only: steps the GradScaler skipped (inf/NaN gradients) while
            its scale settled from 2**16; not a failure.
        scale: float16 only: the GradScaler scale of the step that counted.
        error: what went wrong (``status`` error/unsupported), or why a device was skipped.
        how: how the run was judged (one line).
        excluded: parameters not judged because their reference gradient is negligible.
        kernels: CPU bfloat16/float16 runs only: ``"emulated"`` (GEMMs and convolutions
            computed in float32 from the low-precision operands, rounded once, see
            :mod:`devlint.runtime.emulate`) or ``"native"`` (PyTorch's CPU kernels); else None.
        modules: judged low-precision and float32 runs: one dict per module with its own
            gradient error, floor, limit and float16 underflow share
            (:func:`devlint.runtime.by_module.module_rows`); None otherwise.
        policy: low-precision runs only: whose autocast casting rules the run followed:
            ``"cuda"`` (on the CPU: CUDA autocast's rules emulated,
            :mod:`devlint.runtime.autocast_policy`; on a GPU: the real thing), ``"cpu"``
            (PyTorch's CPU autocast) or ``"mps"``; else None.
    """

    device: str
    mode: str
    status: str
    loss: float | None = None
    loss_err: float | None = None
    grad_err: float | None = None
    floor: float | None = None
    update_err: float | None = None
    skipped_steps: int | None = None
    scale: float | None = None
    error: str | None = None
    how: str | None = None
    excluded: int | None = None
    kernels: str | None = None
    modules: list[dict] | None = None
    policy: str | None = None

    @property
    def ran(self) -> bool:
        """True unless the device was not present."""
        return self.status != "skipped"


#: ``Finding.device`` of the placement run (the step on the stand-in GPU,
#: :mod:`devlint.runtime.standin`), as JSON reports it.
STAND_IN_RUN = "stand-in"
#: What that run is, in the words of the text, Markdown and HTML reports: the CPU computes,
#: its tensors tagged as a GPU's, so a CPU tensor met next to them is what CUDA raises on.
STAND_IN_WORDS = "cpu run posing as cuda (placement check)"


def run_label(device: str | None, mode: str | None = None) -> str:
    """The run a finding comes from, as the text, Markdown and HTML reports print it:
    ``"cpu float16"``, ``"cuda"``, :data:`STAND_IN_WORDS` (the placement run,
    ``device`` :data:`STAND_IN_RUN`; its mode, if any, after a comma), or ``""`` when
    neither is known."""
    if device == STAND_IN_RUN:
        return STAND_IN_WORDS + (f", {mode}" if mode else "")
    return " ".join(x for x in (device, mode) if x)


def legend(runs: list[Run]) -> list[str]:
    """What the run table's less obvious columns mean, one line each, for the text, Markdown
    and HTML reports: ``floor`` when a row was judged against the reference (has a grad err),
    ``skipped steps`` when a float16 row skipped any; ``[]`` when neither applies."""
    out = []
    if any(r.grad_err is not None for r in runs):
        out.append("floor: the grad err of a float32 run that rounds to this row's dtype only, "
                   "i.e. the noise the dtype alone makes on this model; measured only for a run "
                   "beyond the quick bound (- when not needed), which then passes within k x floor")
    if any(r.skipped_steps for r in runs):
        out.append("skipped steps: float16 steps the GradScaler skipped (inf/NaN gradients) "
                   "while its scale fell from 65536 to one that fits, the scale shown being the "
                   "one of the step that counted; normal, not a failure")
    return out


def seed_words(report: "Report") -> str:
    """The seed of ``report`` as its headers say it: whether the model and batch were built
    under it too (the CLI calls the target's function after seeding) or only the runs were
    (``check_step`` receives a model the caller built)."""
    if report.model_seeded:
        return f"seed {report.seed} (model and batch built under it)"
    return f"seed {report.seed} (the runs only; the model and batch were built by the caller)"


@dataclass
class Finding:
    """One problem found by the runtime checker.

    Attributes:
        kind: ``device-placement``, ``probe-incomplete``, ``non-finite``, ``underflow``,
            ``master-weights``, ``mismatch``, ``deprecation`` or ``step-error``.
        message: what is wrong.
        fix: the fix, in a few words.
        module: the module path inside the model (``"encoder.fc1 (Linear)"``), or where the code
            ran (``"loss_fn (outside the model)"``); ``None`` when unknown.
        name: the parameter, buffer or tensor concerned (``"fc1.weight"``), if any.
        op: the ATen op (``"aten.add.Tensor"``) or API concerned, if any.
        device: device of the run that showed it (:data:`STAND_IN_RUN`, ``"stand-in"``, for
            the placement run; reports print :func:`run_label`).
        mode: precision mode of that run, if any.
        related: the static devlint rule for the same problem (``"DEV112"``), if any.
        details: numbers behind the message (ranges, fractions, errors).
        severity: ``"error"`` (the report is not ok) or ``"info"`` (shown, does not fail the
            report: underflow that the GradScaler recovers).
    """

    kind: str
    message: str
    fix: str
    module: str | None = None
    name: str | None = None
    op: str | None = None
    device: str | None = None
    mode: str | None = None
    related: str | None = None
    details: dict = field(default_factory=dict)
    severity: str = "error"


_KERNELS = {
    "emulated": "matmuls and convolutions computed in float32 from the low-precision operands "
                "and rounded once, as a GPU's tensor cores do (--cpu-kernels native runs PyTorch's "
                "own cpu kernels instead)",
    "native": "PyTorch's own cpu low-precision kernels (--cpu-kernels emulated computes matmuls "
              "and convolutions in float32 instead, as a GPU's tensor cores do)",
}
_POLICIES = {
    "cuda": "cpu bfloat16/float16 runs cast op by op as CUDA autocast does (the GPU's rules; "
            "--autocast-policy cpu follows CPU autocast's own)",
    "cpu": "cpu bfloat16/float16 runs cast op by op as CPU autocast does (--autocast-policy cuda "
           "follows a CUDA GPU's rules)",
}


def _rules(r: "Run") -> str:
    """The autocast rules and kernels of a row: ``"cuda/emulated"`` (CUDA's rules on the CPU,
    emulated GEMMs), ``"cpu/native"``, ``"cuda"`` (a real GPU) ...; ``"-"`` for float32."""
    if r.policy is None:
        return "-"
    return f"{r.policy}/{r.kernels}" if r.kernels else r.policy


def _num(x: float | None, fmt: str = ".1e") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    if x == 0:
        return "0"
    return format(x, fmt)


@dataclass
class Report:
    """The result of :func:`devlint.runtime.check_step`.

    ``str(report)`` is a table (one row per run: loss, errors against the reference, skipped
    GradScaler steps, status), then run errors, notes and findings. :meth:`to_json` holds the
    same content.

    Attributes:
        step: the step's name.
        seed: the seed every run started from.
        torch_version: ``torch.__version__``.
        runs: one :class:`Run` per device and mode, including skipped devices.
        findings: the :class:`Finding` list, in the order found.
        notes: remarks that are not findings (for example a probe that could not finish).
        cpu_kernels: how the CPU low-precision runs computed GEMMs and convolutions,
            ``"emulated"`` or ``"native"`` (``"auto"`` resolved, see
            :func:`devlint.runtime.check_step`).
        autocast_policy: whose autocast rules the CPU low-precision runs followed, ``"cuda"``
            or ``"cpu"`` (see :func:`devlint.runtime.check_step`).
        model_seeded: True when ``torch.manual_seed(seed)`` was set before the model and batch
            were built (``devlint runtime`` calling the target's function, the built-in
            reference step); False when the caller built them (:func:`check_step`), so their
            random weights and data depend on the caller's RNG state, not on ``seed``.
    """

    step: str
    seed: int
    torch_version: str
    runs: list[Run] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cpu_kernels: str = "emulated"
    autocast_policy: str = "cuda"
    model_seeded: bool = False

    @property
    def ok(self) -> bool:
        """True when every run that ran is within tolerance (or unsupported here) and there
        are no findings of severity ``error``."""
        return not self.errors and all(
            r.status in ("reference", "ok", "unsupported", "not compared") for r in self.runs if r.ran
        ) and any(r.status == "reference" for r in self.runs)

    @property
    def errors(self) -> list[Finding]:
        """The findings of severity ``error``."""
        return [f for f in self.findings if f.severity != "info"]

    def to_dict(self) -> dict:
        """The report as plain JSON-ready data (``inf`` becomes the string ``"inf"``)."""

        def clean(obj):
            if isinstance(obj, float) and not math.isfinite(obj):
                return str(obj)
            if isinstance(obj, dict):
                return {k: clean(v) for k, v in obj.items()}
            if isinstance(obj, (list, tuple)):
                return [clean(v) for v in obj]
            return obj

        data = {
            "step": self.step,
            "seed": self.seed,
            "torch_version": self.torch_version,
            "cpu_kernels": self.cpu_kernels,
            "autocast_policy": self.autocast_policy,
            "model_seeded": self.model_seeded,
            "ok": self.ok,
            "runs": [asdict(r) for r in self.runs],
            "findings": [asdict(f) for f in self.findings],
            "notes": list(self.notes),
        }
        return clean(data)

    def to_json(self, indent: int | None = 2) -> str:
        """The report as a JSON string (same content as ``str(report)``)."""
        return json.dumps(self.to_dict(), indent=indent)

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` carrying the readable report unless :attr:`ok`."""
        if not self.ok:
            raise AssertionError("\n" + str(self))

    def __str__(self) -> str:
        header = ["device", "mode", "rules/kernels", "loss", "loss err", "grad err", "floor", "update err",
                  "skipped steps", "status"]
        rows = []
        for r in self.runs:
            ref = r.status == "reference"
            skipped = "-" if r.skipped_steps is None else str(r.skipped_steps)
            if r.scale is not None:
                skipped += f" (scale {r.scale:g})"
            status = r.status
            if r.status in ("skipped", "unsupported", "not compared") and r.error:
                status = f"{r.status}: {r.error}"
            rows.append([
                r.device, r.mode, _rules(r),
                "-" if r.loss is None else ("inf/nan" if not math.isfinite(r.loss) else f"{r.loss:.6g}"),
                "ref" if ref else _num(r.loss_err),
                "ref" if ref else _num(r.grad_err),
                "ref" if ref else _num(r.floor),
                "ref" if ref else _num(r.update_err),
                skipped, status,
            ])
        widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
                  for i, h in enumerate(header)]

        def line(cells):
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

        out = [f"devlint runtime: {self.step}, {seed_words(self)}, torch {self.torch_version}", ""]
        out.append(line(header))
        out.append(line(["-" * w for w in widths]))
        out.extend(line(row) for row in rows)
        keys = legend(self.runs)
        if keys:
            out += ["", *keys]
        errors = [r for r in self.runs if r.status == "error" and r.error]
        if errors:
            out += ["", "run errors:"]
            out += [f"  {r.device} {r.mode}: {r.error}" for r in errors]
        judged = [r for r in self.runs if r.how and r.status in ("ok", "mismatch")]
        if judged:
            out += ["", "how each run was judged:"]
            for r in judged:
                excl = (f"; {r.excluded} parameter{'s' if r.excluded != 1 else ''} with a negligible "
                        "gradient not judged") if r.excluded else ""
                out.append(f"  {r.device} {r.mode}: {r.how}{excl}")
        kernels = sorted({r.kernels for r in self.runs if r.kernels and r.status not in ("skipped",)})
        for k in kernels:
            out.append(f"  cpu bfloat16/float16 runs: {_KERNELS[k]}")
        policies = sorted({r.policy for r in self.runs if r.device == "cpu" and r.policy in _POLICIES})
        for p in policies:
            out.append(f"  {_POLICIES[p]}")
        if self.notes:
            out += ["", "notes:"]
            out += [f"  {n}" for n in self.notes]
        out.append("")
        if not self.findings:
            out.append("ok: every run is within tolerance, no findings" if self.ok
                       else "failed: see the runs above")
            return "\n".join(out)
        n_err = len(self.errors)
        info = len(self.findings) - n_err
        out.append(f"findings ({n_err}" + (f", and {info} for information)" if info else ")") + ":")
        for i, f in enumerate(self.findings, 1):
            where = run_label(f.device, f.mode)
            out.append(f"{i}. [{f.kind}]" + (" (info)" if f.severity == "info" else "")
                       + (f" {where}" if where else "")
                       + (f" (static rule {f.related})" if f.related else ""))
            out.append(f"   {f.message}")
            parts = [f"module: {f.module}" if f.module else "",
                     f"tensor: {f.name}" if f.name else "",
                     f"op: {f.op}" if f.op else ""]
            parts = [p for p in parts if p]
            if parts:
                out.append("   " + "; ".join(parts))
            out.append(f"   fix: {f.fix}")
        out.append("")
        out.append("ok: no errors (information only)" if self.ok else "failed: see the findings above")
        return "\n".join(out)
