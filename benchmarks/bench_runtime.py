"""Cost of ``check_step`` on the zoo of real models, next to one plain float32 step.

    python benchmarks/bench_runtime.py                 # the CI sizes (fixtures/runtime/zoo.py)
    python benchmarks/bench_runtime.py --size medium   # 8x wider, longer sequences
    python benchmarks/bench_runtime.py --models hf_gpt2 nanogpt --repeats 3 --threads 1
    python benchmarks/bench_runtime.py --size medium --output benchmarks/runtime_results.md
    python benchmarks/bench_runtime.py --cpu-kernels native   # PyTorch's own CPU bf16/fp16 kernels

For every correct zoo model and the convolution/BatchNorm/squeeze-excite models of
``fixtures/runtime/zoo_policy.py`` (``COST``: EfficientNet-like, hundreds of small ops), in a
fresh subprocess: build the step (``torch.manual_seed(0)``),
time one plain float32 training step (deep copy excluded: forward, backward,
``optimizer.step``; one warm-up, then the median of 3), then ``check_step(step,
devices=["cpu"])``; this pair is repeated ``--repeats`` times, interleaved, so both see the
same machine load, and the table shows medians: ``ratio`` is the median of check / plain over
the repeats in wall time, ``cpu ratio`` the same in process CPU time (``time.process_time``:
less sensitive to other processes on a shared machine when ``--threads 1``). ``extra MB`` is
the growth of the process's peak resident memory during the first check (``ru_maxrss``, after
the plain steps already reached their own peak), ``x params`` the same in units of the model's
parameter bytes. ``warm x`` is that growth in another process that first checked the
CI-sized model of the same architecture (one repeat): what the check needs for this model
once the process's one-time costs (lazy imports, oneDNN's low-precision kernels and caches,
the autocast and dispatch machinery: ~3-5 MB on the CI sizes) are paid. Targets (issue 10):
CPU-time ratio at most 8 for a transformer-sized model, extra memory at most 3x the parameter
bytes; the last two columns say whether each is met (memory ``warm`` when only the warm
figure is). The load average is
printed before and after.

``--cli`` also times ``devlint runtime`` on the built-in reference step (wall time of a fresh
process, torch import included; target under 3 s on a 2-core machine).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATIO_TARGET = 8.0
MEMORY_TARGET = 3.0

_CHILD = r"""
import copy, json, resource, statistics, sys, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[1])
import torch
import zoo
import zoo_policy
from devlint.runtime import check_step
from devlint.runtime.step import Parameters
name, size, repeats, threads, kernels = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
warm = sys.argv[7] == "warm"
if threads:
    torch.set_num_threads(threads)
if warm:  # the process's one-time costs first: a check of the CI-sized model
    torch.manual_seed(0)
    check_step((getattr(zoo, name, None) or getattr(zoo_policy, name))(), devices=["cpu"], cpu_kernels=kernels)
if size == "medium":
    zoo.WIDTH, zoo.SEQ, zoo.BATCH = 8, 128, 8
torch.manual_seed(0)
step = (getattr(zoo, name, None) or getattr(zoo_policy, name))()

def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out

def plain_step():
    model = copy.deepcopy(step.model)
    opt = step.optimizer(Parameters(model))
    def go():
        step.loss_fn(model, step.batch).backward()
        opt.step()
    return timed(go)[:2]

plain_step()
rows, extra, ok, floors = [], None, None, 0
for i in range(repeats):
    p = sorted(plain_step() for _ in range(3))[1]  # the median of 3 (by wall time)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cw, cc, report = timed(lambda: check_step(step, devices=["cpu"], cpu_kernels=kernels))
    if extra is None:
        extra = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
        ok = report.ok
        floors = sum(r.floor is not None for r in report.runs)
    rows.append((p[0], p[1], cw, cc))
params = sum(p.numel() for p in step.model.parameters())
pbytes = sum(p.numel() * p.element_size() for p in step.model.parameters())
med = lambda xs: statistics.median(xs)
print(json.dumps({"params": params, "ok": ok, "plain_s": med([r[0] for r in rows]),
                  "check_s": med([r[2] for r in rows]),
                  "ratio": med([r[2] / r[0] for r in rows]), "cpu_ratio": med([r[3] / r[1] for r in rows]),
                  "extra_mb": extra, "param_mb": pbytes / 2**20, "floors": floors,
                  "threads": torch.get_num_threads()}))
"""


def bench_model(name: str, size: str, repeats: int, threads: int, kernels: str, warm: bool = False) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, os.path.join(ROOT, "fixtures", "runtime"), name, size,
                           str(repeats), str(threads), kernels, "warm" if warm else "cold"],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_cli(n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "devlint.runtime", "--device", "cpu"], capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return times


def _git() -> str:
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return proc.stdout.strip() or "?"


def _load() -> str:
    return "%.1f %.1f %.1f" % os.getloadavg()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["ci", "medium"], default="ci")
    parser.add_argument("--models", nargs="*", help="zoo function names (default: every correct model)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved plain/check pairs (default 3)")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads in the child (0: torch's default)")
    parser.add_argument("--cpu-kernels", choices=["auto", "emulated", "native"], default="auto")
    parser.add_argument("--output", help="also write the table as Markdown to this file (appended)")
    parser.add_argument("--cli", action="store_true", help="also time devlint runtime on the reference step")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "fixtures", "runtime"))
    import zoo
    import zoo_policy

    import torch

    names = args.models or [f.__name__ for f in [*zoo.CORRECT, *zoo_policy.COST]]
    load0 = _load()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"size {args.size}, cpu_kernels {args.cpu_kernels}, {os.cpu_count()} CPUs, threads "
            f"{args.threads or 'default'}, {args.repeats} repeats, load average {load0} at start")
    print(head)
    cols = ["model", "params", "verdict", "check s", "plain step s", "ratio", "cpu ratio", "extra MB",
            "x params", "warm x", "floors", "cpu ratio <= 8", "mem <= 3x"]
    md = ["| " + " | ".join(cols) + " |", "|---|--:|:-:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|:-:|"]
    print(f"{'model':<20} {'params':>9} {'verdict':>8} {'check s':>8} {'plain step s':>12} {'ratio':>6} "
          f"{'cpu ratio':>9} {'extra MB':>9} {'x params':>8} {'warm x':>6} {'floors':>6} {'ratio<=8':>8} "
          f"{'mem<=3x':>7}")
    for name in names:
        r = bench_model(name, args.size, args.repeats, args.threads, args.cpu_kernels)
        w = bench_model(name, args.size, 1, args.threads, args.cpu_kernels, warm=True) if "error" not in r else r
        if "error" in r or "error" in w:
            print(f"{name:<20} error: {r.get('error') or w['error']}")
            md.append(f"| {name} | error: {r.get('error') or w['error']} |")
            continue
        xp = r["extra_mb"] / r["param_mb"] if r["param_mb"] else float("inf")
        xw = w["extra_mb"] / w["param_mb"] if w["param_mb"] else float("inf")
        met_t = "yes" if r["cpu_ratio"] <= RATIO_TARGET else "**no**"
        met_m = "yes" if xp <= MEMORY_TARGET else ("warm" if xw <= MEMORY_TARGET else "**no**")
        verdict = "ok" if r["ok"] else "FAIL"
        print(f"{name:<20} {r['params']:>9,} {verdict:>8} {r['check_s']:>8.2f} {r['plain_s']:>12.4f} "
              f"{r['ratio']:>6.1f} {r['cpu_ratio']:>9.1f} {r['extra_mb']:>9.1f} {xp:>8.1f} {xw:>6.1f} "
              f"{r['floors']:>6} {met_t.strip('*'):>8} {met_m.strip('*'):>7}", flush=True)
        md.append(f"| {name} | {r['params']:,} | {verdict} | {r['check_s']:.2f} | {r['plain_s']:.4f} | "
                  f"{r['ratio']:.1f} | {r['cpu_ratio']:.1f} | {r['extra_mb']:.1f} | {xp:.1f} | {xw:.1f} | "
                  f"{r['floors']} | {met_t} | {met_m} |")
    load1 = _load()
    print(f"load average {load1} at end")
    if args.cli:
        times = bench_cli(3)
        print(f"devlint runtime (reference step), median of 3: {statistics.median(times):.2f} s")
    if args.output:
        cmd = "python benchmarks/bench_runtime.py " + " ".join(argv if argv is not None else sys.argv[1:])
        with open(args.output, "a", encoding="utf-8") as out:
            out.write(f"\n## `{cmd.strip()}`\n\n- date: {when}; devlint git {_git()}; torch {torch.__version__}; "
                      f"Python {platform.python_version()}\n- {head}; load average {load1} at end\n\n")
            out.write("\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
