"""The runtime report as HTML (``--html``) and Markdown (``--format markdown``), and the HTML
page as a browser draws it (Debian's Chromium, headless: a screenshot, then the charts' pixels).

Most tests build a :class:`~devlint.runtime.report.Report` by hand (no torch needed); the CLI
and pytest-plugin tests run real checks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

from devlint.runtime.report import Finding, Report, Run

pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib (pip install -e '.[test]')")
from devlint.runtime import report_html, report_markdown  # noqa: E402

GREEN = (0x2E, 0x7D, 0x32)
RED = (0xC6, 0x28, 0x28)


def module(name, err, floor, limit, **extra):
    return {"module": name, "params": 100, "grad_err": err, "floor": floor, "limit": limit,
            "judged": True, **extra}


def sample_report() -> Report:
    """A failed check with every section: judged runs, float16, placement, ranks."""
    report = Report("toy (Toy)", 0, "2.13.0+cpu")
    report.runs = [
        Run("cpu", "float32", "reference", loss=1.25),
        Run("cpu", "bfloat16", "mismatch", loss=1.3, loss_err=4e-2, grad_err=0.3, floor=2e-3,
            modules=[module("enc (Linear)", 2e-3, 1e-3, 2.4e-2), module("norm (NaiveNorm)", 0.9, 2e-3, 4.8e-2)]),
        Run("cpu", "float16", "ok", loss=1.25, loss_err=1e-4, grad_err=4e-4, skipped_steps=3, scale=8192.0,
            modules=[module("enc (Linear)", 4e-4, None, 3.9e-3, underflow=0.02, tiny=0.3),
                     module("norm (NaiveNorm)", 0.0, None, 3.9e-3, underflow=0.0, tiny=0.0)]),
        Run("cuda", "-", "skipped", error="no CUDA device"),
        Run("cpu", "1 process, 8 samples", "reference", loss=1.25),
        Run("cpu", "ddp rank 0/2", "ok", loss=1.2, loss_err=1e-7, grad_err=2e-6, how="vs one process"),
        Run("cpu", "ddp rank 1/2", "mismatch", loss=1.3, loss_err=3e-2, grad_err=0.2),
    ]
    report.findings = [
        Finding("device-placement", "torch.arange in forward is made on the cpu", "pass device=x.device",
                module="pos (Embedding)", name="positions", op="aten.arange", device="stand-in", related="DEV112"),
        Finding("mismatch", "norm's gradient is 450x its floor <b>", "compute it in float32",
                module="norm (NaiveNorm)", device="cpu", mode="bfloat16"),
    ]
    report.notes = ["distributed cpu: 2 ranks took 1.0 s"]
    return report


def test_html_is_one_offline_page_with_every_section():
    page = report_html.render(sample_report())
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 5  # 2 runs, scale, underflow, ranks
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page) and "<script" not in page
    assert "@import" not in page and "url(" not in page.replace("url(#", "")  # only in-page references
    for text in ("failed", "Gradient error per module", "Loss scale and skipped steps",
                 "Device placement", "pos (Embedding)", "aten.arange", "ranks against one process",
                 "<td>cpu run posing as cuda (placement check)</td>"):
        assert text in page, text
    assert "&lt;b&gt;" in page and "<b>" not in page  # messages escaped


def test_every_format_names_the_placement_run_in_words():
    # the placement run's device is "stand-in" in JSON; the reports say what it is, alike
    report = sample_report()
    report.findings.append(Finding("probe-incomplete", "the check could not finish", "report it",
                                   device="stand-in", mode="float32"))
    text, md, page = str(report), report_markdown.render(report), report_html.render(report)
    assert "1. [device-placement] cpu run posing as cuda (placement check) (static rule DEV112)" in text
    assert "3. [probe-incomplete] cpu run posing as cuda (placement check), float32" in text
    assert "| 3 | probe-incomplete | cpu run posing as cuda (placement check), float32 |" in md
    assert "<td>cpu run posing as cuda (placement check), float32</td>" in page
    for out in (text, md, page):
        assert "stand-in" not in out and ">meta<" not in out and " meta " not in out
    assert [f["device"] for f in report.to_dict()["findings"]] == ["stand-in", "cpu", "stand-in"]


FLOOR_KEY = "floor: the grad err of a float32 run that rounds to this row's dtype only"
SKIPPED_KEY = "skipped steps: float16 steps the GradScaler skipped (inf/NaN gradients)"


def test_every_format_says_what_floor_and_skipped_steps_mean():
    # a new user read "4 (scale 4096)" skipped steps as a failure, and "floor" was explained nowhere
    report = sample_report()
    text, md, page = str(report), report_markdown.render(report), report_html.render(report)
    for out in (text, md, page.replace("&#x27;", "'")):
        assert FLOOR_KEY in out and SKIPPED_KEY in out and "normal, not a failure" in out
    assert text.index(FLOOR_KEY) < text.index("findings (")  # under the table
    quick = Report("toy (Toy)", 0, "2.13.0+cpu", runs=[Run("cpu", "float32", "reference", loss=1.0),
                                                      Run("cpu", "float16", "ok", loss=1.0, grad_err=1e-4,
                                                          skipped_steps=0, scale=65536.0)])
    for out in (str(quick), report_markdown.render(quick), report_html.render(quick)):
        assert "(- when not needed)" in out and "skipped steps:" not in out  # a "-" floor explained too
    plain = Report("toy (Toy)", 0, "2.13.0+cpu", runs=[Run("cpu", "float32", "reference", loss=1.0),
                                                      Run("cuda", "-", "skipped", error="no CUDA device")])
    for out in (str(plain), report_markdown.render(plain), report_html.render(plain)):
        assert "floor:" not in out and "skipped steps:" not in out  # nothing judged, no key


def test_every_header_says_whether_the_model_was_built_under_the_seed():
    # the CLI seeds before calling NAME(); check_step gets a model the caller built
    for seeded, words in ((True, "seed 3 (model and batch built under it)"),
                          (False, "seed 3 (the runs only; the model and batch were built by the caller)")):
        report = sample_report()
        report.seed, report.model_seeded = 3, seeded
        assert str(report).splitlines()[0] == f"devlint runtime: toy (Toy), {words}, torch 2.13.0+cpu"
        assert f"({words}, torch 2.13.0+cpu)" in report_markdown.render(report)
        assert f'<p class="note">{words}, torch' in report_html.render(report)
        assert report.to_dict()["model_seeded"] is seeded
    assert Report("x", 0, "t").model_seeded is False


def test_markdown_for_a_job_summary():
    text = report_markdown.render(sample_report())
    lines = text.splitlines()
    assert lines[0] == "## devlint runtime: toy (Toy)" and lines[2].startswith("**:x: failed**: 2 finding(s), 2 run(s)")
    assert "| cpu | float16 | ok | 1.25 | 1.0e-04 | 4.0e-04 | - | 3 (scale 8192) |" in lines
    assert "| cpu bfloat16 | norm (NaiveNorm) | 9.0e-01 | 2.0e-03 | 4.8e-02 |" in lines  # beyond its limit
    assert not any("enc (Linear) | 2.0e-03" in line for line in lines)  # within: not listed
    assert "| 1 | device-placement (DEV112) | cpu run posing as cuda (placement check) | pos (Embedding) | positions |" in text
    assert text.endswith("\n") and "450x its floor &lt;b>" in text  # no raw HTML in a summary


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
MEASURE = """<script>
document.body.setAttribute('data-layout', JSON.stringify({
  height: document.documentElement.scrollHeight,
  charts: [...document.querySelectorAll('.chart svg')].map(s => {
    const r = s.getBoundingClientRect(); return [r.x, r.y + window.scrollY, r.width, r.height]; })}));
</script></body>"""


def chromium(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{name}"  # a fresh profile each time
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=180, env=dict(os.environ, HOME=str(tmp_path)))


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium; "
                    ".ci/run installs it where apt-get can)")
def test_browser_draws_the_charts(tmp_path):
    from PIL import Image  # comes with matplotlib

    page = report_html.render(sample_report())
    (tmp_path / "report.html").write_text(page, encoding="utf-8")
    (tmp_path / "measure.html").write_text(page.replace("</body>", MEASURE), encoding="utf-8")
    dom = chromium(tmp_path, "dom", "--window-size=1200,900", "--dump-dom", (tmp_path / "measure.html").as_uri())
    found = re.search(r"data-layout=\"([^\"]+)\"", dom.stdout)
    assert found, dom.stderr[-2000:]
    layout = json.loads(found.group(1).replace("&quot;", '"'))
    assert len(layout["charts"]) == 5 and all(w > 300 and h > 100 for _, _, w, h in layout["charts"])
    shot = tmp_path / "shot.png"
    chromium(tmp_path, "shot", f"--window-size=1200,{int(layout['height']) + 20}",
             f"--screenshot={shot}", (tmp_path / "report.html").as_uri())
    assert shot.exists()
    image = Image.open(shot).convert("RGB")
    for i, (x, y, w, h) in enumerate(layout["charts"]):
        region = image.crop((int(x), int(y), int(x + w), int(y + h)))
        colours = region.getcolors(region.width * region.height)
        inked = sum(n for n, p in colours if sum(p) < 700) / (region.width * region.height)
        assert inked > 0.01, f"chart {i} is blank ({inked:.3%} inked)"
    x, y, w, h = (int(v) for v in layout["charts"][0])
    first = image.crop((x, y, x + w, y + h)).getcolors(w * h)

    def count(colour) -> int:
        return sum(n for n, p in first if all(abs(a - b) < 24 for a, b in zip(p, colour)))

    assert count(GREEN) > 200  # the module within its limit
    assert count(RED) > 200  # the module beyond it, and the limit ticks


STEP = "fixtures/runtime/steps.py:arange_in_forward"


def test_cli_writes_html_and_markdown(tmp_path):
    pytest.importorskip("torch")
    page = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "devlint", "runtime", str(ROOT / STEP), "--mode", "float32",
                           "--format", "markdown", "--html", str(page)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[2].startswith("**:x: failed**: 1 finding(s)")
    assert "| 1 | device-placement (DEV112) | cpu run posing as cuda (placement check) | pos (AddPosition) |" in proc.stdout
    assert "(seed 0 (model and batch built under it), torch" in proc.stdout  # NAME() ran after seeding
    text = page.read_text(encoding="utf-8")
    assert "<h2>Device placement</h2>" in text and "pos (AddPosition)" in text and "failed" in text
    assert f"wrote the HTML report to {page}" in proc.stderr  # where it went, as the user asked


def test_a_failing_assert_step_ok_attaches_the_html(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "test_step.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'fixtures' / 'runtime')!r})\n"
        "from steps import arange_in_forward\n"
        "from devlint.runtime import assert_step_ok\n\n"
        "def test_placement():\n"
        "    assert_step_ok(arange_in_forward(), modes=['float32'])\n")
    reports = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_step.py",
                           "--junitxml", "junit.xml"], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env=dict(os.environ, DEVLINT_REPORT_DIR=str(reports)))
    assert proc.returncode == 1, proc.stdout[-3000:]
    written = re.search(r"HTML report: (\S+\.html)", proc.stdout)
    assert written, proc.stdout[-3000:]
    path = Path(written.group(1))
    assert path.parent == reports and "pos (AddPosition)" in path.read_text(encoding="utf-8")
    junit = (tmp_path / "junit.xml").read_text()
    assert f'<property name="devlint_report" value="{path}"' in junit
