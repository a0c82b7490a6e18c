"""How close each correct zoo model comes to failing the runtime check, over several seeds.

For every correct model of fixtures/runtime/zoo.py and zoo_wide.py and every seed, prints the
low-precision runs' whole-model gradient error ``E``, how the run was judged (``quick``: within
the quick bound; else the noise floor ``F``, ``k * F`` and, when it was needed, the wide floor)
and ``E / limit`` (a correct model must stay below 1; the calibration of ``k`` in
docs/runtime.md quotes this table). CPU only, one thread.

    python benchmarks/runtime_margins.py [--seeds 0,1,2,3] [--zoo all|zoo|wide] [NAME ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from pathlib import Path

import torch

from devlint.runtime import check_step

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "runtime"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"devlint_margins_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _limit(how: str) -> tuple[float | None, float | None]:
    floor = re.search(r"limit ([\d.e+-]+)\)", how or "")
    wide = re.search(r"perturbation \(([\d.e+-]+)\)", how or "")
    return (float(floor.group(1)) if floor else None, float(wide.group(1)) if wide else None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--zoo", choices=("all", "zoo", "wide"), default="all")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    factories = []
    if args.zoo in ("all", "zoo"):
        factories += _load("zoo").CORRECT
    if args.zoo in ("all", "wide"):
        factories += _load("zoo_wide").CORRECT
    if args.names:
        factories = [f for f in factories if f.__name__ in args.names]
    print(f"{'model':30s} {'seed':>4s} {'mode':8s} {'E':>8s} {'k*F':>8s} {'wide':>8s} {'E/limit':>8s} {'s':>5s}")
    worst = 0.0
    for f in factories:
        for seed in (int(s) for s in args.seeds.split(",")):
            torch.manual_seed(seed)
            t = time.perf_counter()
            report = check_step(f(), devices=["cpu"])
            dt = time.perf_counter() - t
            for run in report.runs:
                if run.mode not in ("bfloat16", "float16") or run.grad_err is None:
                    continue
                kf, wide = _limit(run.how)
                limit = max(x for x in (kf, wide, 0.0) if x is not None)
                ratio = run.grad_err / limit if limit else None
                worst = max(worst, ratio or 0.0)
                print(f"{f.__name__:30s} {seed:4d} {run.mode:8s} {run.grad_err:8.1e} "
                      f"{'quick' if kf is None else f'{kf:.1e}':>8s} {'-' if wide is None else f'{wide:.1e}':>8s} "
                      f"{'-' if ratio is None else f'{ratio:.2f}':>8s} {dt:5.1f}"
                      + ("" if run.status == "ok" else f"  {run.status}"), flush=True)
    print(f"worst E/limit: {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
