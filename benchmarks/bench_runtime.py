"""Cost of ``check_step`` on the zoo of real models, next to one plain float32 step.

    python benchmarks/bench_runtime.py                 # the CI sizes (fixtures/runtime/zoo.py)
    python benchmarks/bench_runtime.py --size medium   # 8x wider, longer sequences
    python benchmarks/bench_runtime.py --models hf_gpt2 nanogpt --cli

For every correct zoo model, in a fresh subprocess: build the step (``torch.manual_seed(0)``),
time one plain float32 training step (deep copy excluded: forward, backward,
``optimizer.step``; one warm-up, then the median of 3), then time ``check_step(step,
devices=["cpu"])`` once. ``extra MB`` is the growth of the process's peak resident memory
during the check (``ru_maxrss``, after the plain steps already reached their own peak), and
``x params`` the same in units of the model's parameter bytes. Targets (issue 10): ratio at
most 8 for a transformer-sized model, extra memory at most 3x the parameter bytes.

``--cli`` also times ``devlint runtime`` on the built-in reference step (wall time of a fresh
process, torch import included; target under 3 s on a 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import copy, json, resource, sys, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[1])
import torch
import zoo
from devlint.runtime import check_step
from devlint.runtime.step import Parameters
if sys.argv[3] == "medium":
    zoo.WIDTH, zoo.SEQ, zoo.BATCH = 8, 128, 8
torch.manual_seed(0)
step = getattr(zoo, sys.argv[2])()

def plain():
    model = copy.deepcopy(step.model)
    opt = step.optimizer(Parameters(model))
    t = time.perf_counter()
    step.loss_fn(model, step.batch).backward()
    opt.step()
    return time.perf_counter() - t

plain()
plain_s = sorted(plain() for _ in range(3))[1]  # the median of 3
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
report = check_step(step, devices=["cpu"])
check_s = time.perf_counter() - t
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
params = sum(p.numel() for p in step.model.parameters())
pbytes = sum(p.numel() * p.element_size() for p in step.model.parameters())
print(json.dumps({"params": params, "ok": report.ok, "plain_s": plain_s, "check_s": check_s,
                  "extra_mb": (rss1 - rss0) / 1024, "param_mb": pbytes / 2**20,
                  "floors": sum(r.floor is not None for r in report.runs)}))
"""


def bench_model(name: str, size: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, os.path.join(ROOT, "fixtures", "runtime"), name, size],
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["ci", "medium"], default="ci")
    parser.add_argument("--models", nargs="*", help="zoo function names (default: every correct model)")
    parser.add_argument("--cli", action="store_true", help="also time devlint runtime on the reference step")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "fixtures", "runtime"))
    import zoo

    names = args.models or [f.__name__ for f in zoo.CORRECT]
    print(f"size {args.size}, {os.cpu_count()} CPUs")
    print(f"{'model':<20} {'params':>9} {'verdict':>8} {'check s':>8} {'plain step s':>12} {'ratio':>6} "
          f"{'extra MB':>9} {'x params':>8} {'floors':>6}")
    for name in names:
        r = bench_model(name, args.size)
        if "error" in r:
            print(f"{name:<20} error: {r['error']}")
            continue
        ratio = r["check_s"] / r["plain_s"] if r["plain_s"] else float("inf")
        xp = r["extra_mb"] / r["param_mb"] if r["param_mb"] else float("inf")
        print(f"{name:<20} {r['params']:>9,} {'ok' if r['ok'] else 'FAIL':>8} {r['check_s']:>8.2f} "
              f"{r['plain_s']:>12.4f} {ratio:>6.1f} {r['extra_mb']:>9.1f} {xp:>8.1f} {r['floors']:>6}", flush=True)
    if args.cli:
        times = bench_cli(3)
        print(f"devlint runtime (reference step), median of 3: {statistics.median(times):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
