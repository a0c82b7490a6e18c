"""``devlint runtime --format markdown``: the report as GitHub-flavoured Markdown, for a CI job
summary (``devlint runtime ... --format markdown >> "$GITHUB_STEP_SUMMARY"``).

The verdict first, then the run table, the modules beyond their limit (see
:func:`devlint.runtime.by_module.module_rows`), and the findings with module, tensor and fix.
Plain text only: no HTML, no images; the same numbers as ``str(report)``.
"""

from __future__ import annotations

import math

from .report import Report, legend, run_label, seed_words

__all__ = ["render"]


def _num(x, fmt: str = ".1e") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return "0" if x == 0 else format(x, fmt)


def _cell(text) -> str:
    """Table-safe text: one line, pipes escaped, no raw HTML (``<`` as ``&lt;``)."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;")


def render(report: Report) -> str:
    """The Markdown of ``report`` (a :class:`devlint.runtime.Report`), ending in a newline."""
    mark = ":white_check_mark: ok" if report.ok else ":x: failed"
    out = [f"## devlint runtime: {_cell(report.step)}", "",
           f"**{mark}**: {len(report.errors)} finding(s), "
           f"{sum(r.status == 'mismatch' for r in report.runs)} run(s) beyond tolerance "
           f"({seed_words(report)}, torch {report.torch_version})", "",
           "| device | mode | status | loss | loss err | grad err | floor | skipped steps |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in report.runs:
        ref = r.status == "reference"
        status = r.status + (f": {r.error}" if r.error and not ref else "")
        loss = "-" if r.loss is None else ("inf/nan" if not math.isfinite(r.loss) else f"{r.loss:.6g}")
        skipped = "-" if r.skipped_steps is None else f"{r.skipped_steps} (scale {r.scale:g})" \
            if r.scale is not None else str(r.skipped_steps)
        cells = [r.device, r.mode, status, loss,
                 *("ref" if ref else _num(x) for x in (r.loss_err, r.grad_err, r.floor)), skipped]
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    keys = legend(report.runs)
    if keys:
        out += ["", *(f"- {_cell(k)}" for k in keys)]
    beyond = [(r, m) for r in report.runs for m in (r.modules or ())
              if m.get("judged") and m.get("grad_err") is not None and m["grad_err"] > m["limit"]]
    if beyond:
        out += ["", "Modules beyond their own limit:", "",
                "| run | module | grad err | floor | limit |", "|---|---|---:|---:|---:|"]
        out += [f"| {r.device} {r.mode} | {_cell(m['module'])} | {_num(m['grad_err'])} | "
                f"{_num(m['floor'])} | {_num(m['limit'])} |" for r, m in beyond]
    if report.findings:
        out += ["", "| # | finding | run | module | tensor | what | fix |", "|---|---|---|---|---|---|---|"]
        for i, f in enumerate(report.findings, 1):
            kind = f.kind + (" (info)" if f.severity == "info" else "") + (f" ({f.related})" if f.related else "")
            run = run_label(f.device, f.mode)
            out.append("| " + " | ".join(_cell(c) for c in (i, kind, run or "-", f.module or "-",
                                                             f.name or "-", f.message, f.fix)) + " |")
    if report.notes:
        out += ["", *(f"- {_cell(n)}" for n in report.notes)]
    return "\n".join(out) + "\n"
