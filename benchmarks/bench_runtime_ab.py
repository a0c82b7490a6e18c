"""The cost of ``check_step`` in two devlint trees, interleaved (A B A B ...), per zoo model.

    python benchmarks/bench_runtime_ab.py --before /path/to/other/checkout --rounds 5
    python benchmarks/bench_runtime_ab.py --before ../old --models efficientnet_b0ish mlp_bn

One long-lived worker process per tree (``PYTHONPATH`` set to that tree, torch at one
thread), so start-up is paid once, not per sample. Each round asks every model of each
worker in turn (the order of the two alternates between rounds): build the step once
(``torch.manual_seed(0)``, then one warm-up check and plain step), then one sample: the
median of 3 plain float32 training steps (deep copy and optimizer construction excluded:
forward, backward, ``optimizer.step``) and one ``check_step(step, devices=["cpu"])``, both in
process CPU time; the sample is check / plain, in plain steps. Printed per model: the plain
step's median, each tree's median (min) over the rounds, the ratio of the minima (after /
before) and whether every check passed in both. Models: ``zoo.CORRECT`` and
``zoo_policy.COST`` of this tree (``fixtures/runtime``), CI sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WORKER = r"""
import copy, json, statistics, sys, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
import zoo, zoo_policy
from devlint.runtime import check_step
from devlint.runtime.step import Parameters
steps = {}
def plain(step):
    model = copy.deepcopy(step.model)
    opt = step.optimizer(Parameters(model))
    start = time.process_time()
    step.loss_fn(model, step.batch).backward()
    opt.step()
    return time.process_time() - start
for line in sys.stdin:
    name = line.strip()
    if name not in steps:
        torch.manual_seed(0)
        steps[name] = (getattr(zoo, name, None) or getattr(zoo_policy, name))()
        check_step(steps[name], devices=["cpu"])
        plain(steps[name])
    step = steps[name]
    p = statistics.median(plain(step) for _ in range(3))
    start = time.process_time()
    ok = check_step(step, devices=["cpu"]).ok
    print(json.dumps({"ratio": (time.process_time() - start) / p, "ok": ok, "plain": p}), flush=True)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the other devlint tree (B)")
    parser.add_argument("--after", default=ROOT, help="this tree by default (A)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", nargs="*")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "fixtures", "runtime"))
    if args.models:
        models = args.models
    else:
        import zoo
        import zoo_policy

        models = [f.__name__ for f in [*zoo.CORRECT, *zoo_policy.COST]]
    trees = {"after": os.path.abspath(args.after), "before": os.path.abspath(args.before)}
    procs = {t: subprocess.Popen([sys.executable, "-c", _WORKER, os.path.join(root, "fixtures", "runtime")],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root,
                                 env=dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1"))
             for t, root in trees.items()}
    res = {m: {t: [] for t in trees} for m in models}
    try:
        for r in range(args.rounds):
            for m in models:
                for t in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                    procs[t].stdin.write(m + "\n")
                    procs[t].stdin.flush()
                    line = procs[t].stdout.readline()
                    if not line:
                        raise SystemExit(f"the {t} worker ended at {m}")
                    res[m][t].append(json.loads(line))
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()
    print(f"load average {'%.1f %.1f %.1f' % os.getloadavg()} at end; {args.rounds} rounds")
    print("| model | plain step ms | before: median (min) | after: median (min) | ratio of minima | verdicts |")
    print("|---|--:|--:|--:|--:|:-:|")
    for m in models:
        b = [s["ratio"] for s in res[m]["before"]]
        a = [s["ratio"] for s in res[m]["after"]]
        ok = all(s["ok"] for t in trees for s in res[m][t])
        plain = statistics.median(s["plain"] for t in trees for s in res[m][t]) * 1e3
        print(f"| {m} | {plain:.1f} | {statistics.median(b):.1f} ({min(b):.1f}) | {statistics.median(a):.1f} "
              f"({min(a):.1f}) | {min(a) / min(b):.2f} | {'ok' if ok else 'FAIL'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
