"""``devlint runtime --html FILE``: the report as one self-contained HTML page.

The page needs nothing but itself (no script, no network): the charts are SVG drawn by
matplotlib (devlint's ``[report]`` extra, ``pip install matplotlib``; the linter never imports
it) with their text as paths, inlined in the page. It shows, in this order:

- the verdict (ok or failed) and the run table;
- per judged run, each module's gradient error against its noise floor and its limit
  (log scale; see :func:`devlint.runtime.by_module.module_rows`);
- the float16 runs' loss scale and the steps the GradScaler skipped;
- per float16 run, the share of each module's gradient elements that underflow;
- the device-placement findings with the module path, then every other finding;
- for ``--world-size`` runs, each rank's gradient and loss error against one process.
"""

from __future__ import annotations

import html
import io
import math

from .report import Report, Run, legend, run_label, seed_words

__all__ = ["render", "write", "MissingExtra"]

#: At most this many modules per chart: the worst, relative to their limit.
MAX_MODULES = 40
#: Where a zero error is drawn on a log axis (it is labelled "0" in the table).
_ZERO = 1e-12
_OK, _BAD, _FLOOR, _LIMIT, _GREY = "#2e7d32", "#c62828", "#546e7a", "#c62828", "#90a4ae"

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
.verdict{font-size:1.3em;padding:.6em 1em;border-radius:6px;color:#fff;display:inline-block}
.ok{background:#2e7d32}.failed{background:#c62828}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f4f6f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
.chart{margin:.6em 0}.chart svg{max-width:100%;height:auto}
.note{color:#555;font-size:.9em}code{background:#f4f6f8;padding:0 .2em}
"""


class MissingExtra(ImportError):
    """matplotlib is not installed; the message says how to install it."""


def _pyplot_free_figure(width: float, height: float):
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - the [report] extra is missing
        raise MissingExtra("the HTML report needs matplotlib: pip install matplotlib "
                           "(devlint's [report] extra)") from exc
    return Figure(figsize=(width, height), layout="constrained")


def _svg(fig) -> str:
    """The figure as an inline ``<svg>`` element (text drawn as paths: no font needed)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path"}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return '<div class="chart">' + text[text.index("<svg"):] + "</div>"


def _e(x) -> str:
    return html.escape(str(x))


def _num(x, fmt: str = ".2e") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    if isinstance(x, str):
        return x
    return "0" if x == 0 else format(x, fmt)


def _pos(x: float | None, low: float = _ZERO) -> float:
    """A value drawable on a log axis whose left end is ``low``."""
    if x is None or not math.isfinite(x):
        return float("nan")
    return max(x, low)


def _low(values) -> float:
    """The left end of a log axis: a decade below the smallest positive finite value."""
    small = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    return 10.0 ** (math.floor(math.log10(min(small))) - 1) if small else _ZERO


def _legend(fig, ax) -> None:
    """The legend under the axes, outside the bars."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=8, frameon=False)


def _module_chart(run: Run) -> str:
    rows = [m for m in run.modules if m.get("judged") and m.get("grad_err") is not None]
    if not rows:
        return '<p class="note">no module with a judged gradient</p>'
    ranked = sorted(rows, key=lambda m: -(m["grad_err"] / m["limit"] if m["limit"] else math.inf))
    shown = ranked[:MAX_MODULES]
    shown.sort(key=lambda m: rows.index(m))
    fig = _pyplot_free_figure(9, 1.2 + 0.32 * len(shown))
    ax = fig.add_subplot()
    y = list(range(len(shown)))
    low = _low([v for m in shown for v in (m["grad_err"], m["floor"], m["limit"])])
    errs = [_pos(m["grad_err"], low) - low for m in shown]
    colours = [_BAD if m["grad_err"] > m["limit"] else _OK for m in shown]
    ax.barh(y, errs, color=colours, height=0.6, label="gradient error", left=low)
    floors = [(i, _pos(m["floor"], low)) for i, m in enumerate(shown) if m["floor"] is not None]
    if floors:
        ax.scatter([f for _, f in floors], [i for i, _ in floors], marker="|", s=260, color=_FLOOR,
                   linewidths=2.5, label="noise floor", zorder=3)
    ax.scatter([_pos(m["limit"], low) for m in shown], y, marker="|", s=260, color=_LIMIT, linewidths=2.5,
               label="limit (k x floor)" if floors else "limit (quick bound)", zorder=3)
    ax.set_xscale("log")
    ax.set_yticks(y, [m["module"] for m in shown], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("relative L2 error of the module's gradient vs the float32 reference")
    ax.set_title(f"{run.device} {run.mode}: gradient error per module", fontsize=10)
    ax.set_xlim(left=low)
    _legend(fig, ax)
    ax.grid(axis="x", which="major", alpha=0.3)
    note = (f'<p class="note">{len(shown)} of {len(rows)} modules shown (the worst against their '
            "limit)</p>") if len(shown) < len(rows) else ""
    return _svg(fig) + note


def _scale_chart(runs: list[Run]) -> str:
    fig = _pyplot_free_figure(7, 0.9 + 0.45 * len(runs))
    ax = fig.add_subplot()
    y = list(range(len(runs)))
    scales = [max(r.scale or 1.0, 1.0) for r in runs]
    ax.barh(y, [math.log2(s) for s in scales], color=_GREY, height=0.5)
    for i, r in enumerate(runs):
        ax.text(math.log2(scales[i]), i, f"  scale {r.scale:g}, {r.skipped_steps or 0} skipped",
                va="center", fontsize=8)
    ax.set_yticks(y, [f"{r.device} {r.mode}" for r in runs], fontsize=8)
    ax.set_xlim(0, 18)
    ax.set_xlabel("log2 of the GradScaler's loss scale in the step that counted (starts at 16)")
    ax.set_title("float16: loss scale and skipped steps", fontsize=10)
    return _svg(fig)


def _underflow_chart(run: Run) -> str:
    rows = [m for m in run.modules if "underflow" in m][:MAX_MODULES]
    if not rows:
        return ""
    if not any(m["underflow"] or m.get("tiny") for m in rows):
        return (f'<p class="note">{_e(run.device)} {_e(run.mode)}: no gradient element of any module '
                "underflows (none is below 2**-24 in float32, none is lost in this run)</p>")
    fig = _pyplot_free_figure(9, 1.2 + 0.32 * len(rows))
    ax = fig.add_subplot()
    y = list(range(len(rows)))
    if any("tiny" in m for m in rows):
        ax.barh([i - 0.2 for i in y], [100 * m.get("tiny", 0.0) for m in rows], height=0.4,
                color=_GREY, label="below 2**-24 in float32 (lost without loss scaling)")
    ax.barh([i + 0.2 for i in y], [100 * m["underflow"] for m in rows], height=0.4, color=_BAD,
            label="zero in this run, non-zero in float32")
    ax.set_yticks(y, [m["module"] for m in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1.0, *(100 * max(m["underflow"], m.get("tiny", 0.0)) for m in rows)) * 1.1)
    ax.set_xlabel("% of the module's gradient elements")
    ax.set_title(f"{run.device} {run.mode}: gradient underflow per module", fontsize=10)
    _legend(fig, ax)
    return _svg(fig)


def _rank_chart(runs: list[Run]) -> str:
    fig = _pyplot_free_figure(8, 1.2 + 0.45 * len(runs))
    ax = fig.add_subplot()
    y = list(range(len(runs)))
    low = _low([v for r in runs for v in (r.grad_err, r.loss_err)])
    ax.barh([i - 0.2 for i in y], [_pos(r.grad_err, low) - low for r in runs], height=0.4, left=low,
            color=[_BAD if r.status == "mismatch" else _OK for r in runs], label="gradient error")
    ax.barh([i + 0.2 for i in y], [_pos(r.loss_err, low) - low for r in runs], height=0.4, left=low,
            color=_GREY, label="loss error")
    ax.set_xscale("log")
    ax.set_yticks(y, [f"{r.device} {r.mode}" for r in runs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("relative error vs one process on the full batch")
    ax.set_title("distributed: each rank against one process", fontsize=10)
    ax.set_xlim(left=low)
    _legend(fig, ax)
    return _svg(fig)


def _run_table(report: Report) -> str:
    head = ("device", "mode", "status", "loss", "loss err", "grad err", "floor", "update err",
            "skipped steps", "scale")
    out = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for r in report.runs:
        ref = r.status == "reference"
        status = r.status + (f": {r.error}" if r.error and r.status != "reference" else "")
        cells = [r.device, r.mode, status, _num(r.loss, ".6g"),
                 *("ref" if ref else _num(x) for x in (r.loss_err, r.grad_err, r.floor, r.update_err)),
                 _num(r.skipped_steps, "d"), _num(r.scale, "g")]
        out.append("<tr>" + "".join(f'<td class="num">{_e(c)}</td>' if i > 2 else f"<td>{_e(c)}</td>"
                                    for i, c in enumerate(cells)) + "</tr>")
    return "\n".join(out) + "</table>"


def _findings_table(findings) -> str:
    head = ("kind", "run", "module", "tensor", "op", "what", "fix")
    out = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for f in findings:
        run = run_label(f.device, f.mode)
        kind = f.kind + (" (info)" if f.severity == "info" else "") + (f" ({f.related})" if f.related else "")
        cells = (kind, run, f.module or "-", f.name or "-", f.op or "-", f.message, f.fix)
        out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    return "\n".join(out) + "</table>"


def render(report: Report) -> str:
    """The whole page for ``report`` (a :class:`devlint.runtime.Report`), as a string.

    Raises:
        MissingExtra: matplotlib is not installed.
    """
    _pyplot_free_figure(1, 1)  # fail first, before any work, when the extra is missing
    verdict = "ok" if report.ok else "failed"
    said = ("every run is within tolerance" + ("" if not report.findings else ", information only")
            if report.ok else f"{len(report.errors)} finding(s), "
            f"{sum(r.status == 'mismatch' for r in report.runs)} run(s) beyond tolerance")
    parts = [f"<h1>devlint runtime: {_e(report.step)}</h1>",
             f'<p><span class="verdict {verdict}">{verdict}: {_e(said)}</span></p>',
             f'<p class="note">{_e(seed_words(report))}, torch {_e(report.torch_version)}, cpu low-precision '
             f"kernels {_e(report.cpu_kernels)}</p>",
             "<h2>Runs</h2>", _run_table(report),
             *(f'<p class="note">{_e(k)}</p>' for k in legend(report.runs))]
    judged = [r for r in report.runs if r.modules]
    if judged:
        parts.append("<h2>Gradient error per module</h2>")
        parts.append('<p class="note">Each bar is a module\'s gradient error against the float32 '
                     "reference; the grey tick is the same error of the noise-floor run (float32 "
                     "with only this dtype's rounding), the red tick the module's limit. The run's "
                     "verdict is judged on the whole model.</p>")
        for r in judged:
            parts.append(_module_chart(r))
    fp16 = [r for r in report.runs if r.mode == "float16" and r.scale is not None]
    if fp16:
        parts.append("<h2>Loss scale and skipped steps</h2>")
        parts.append(_scale_chart(fp16))
        for r in fp16:
            if r.modules:
                parts.append(_underflow_chart(r))
    placement = [f for f in report.findings if f.kind == "device-placement"]
    if placement:
        parts += ["<h2>Device placement</h2>", _findings_table(placement)]
    others = [f for f in report.findings if f.kind != "device-placement"]
    if others:
        parts += ["<h2>Findings</h2>", _findings_table(others)]
    ranks = [r for r in report.runs if " rank " in r.mode and r.grad_err is not None]
    if ranks:
        how = next((r.how for r in ranks if r.how), "")
        parts += ["<h2>Distributed: ranks against one process</h2>",
                  f'<p class="note">Each rank\'s errors against one process on the full batch (green: '
                  f"within tolerance, red: beyond). Judged: {_e(how)}; see the notes.</p>",
                  _rank_chart(ranks)]
    if report.notes:
        parts += ["<h2>Notes</h2>", "<ul>" + "".join(f"<li>{_e(n)}</li>" for n in report.notes) + "</ul>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>devlint runtime: {_e(report.step)} ({verdict})</title><style>{_CSS}</style></head>"
            "<body>\n" + "\n".join(parts) + "\n</body></html>\n")


def write(report: Report, path: str) -> None:
    """Write :func:`render`'s page to ``path`` (UTF-8).

    Raises:
        MissingExtra: matplotlib is not installed.
        OSError: the file cannot be written.
    """
    text = render(report)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
