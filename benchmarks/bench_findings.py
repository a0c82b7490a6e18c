#!/usr/bin/env python3
"""Files dense with findings (issues 24 and 27): CPU time and peak memory of ``devlint check``
on generated files where the cost is per finding, next to ``ruff check --select ALL`` on the
same files, interleaved (A B A B ...), minima and medians.

    .venv/bin/python benchmarks/bench_findings.py                 # 5 rounds, every row
    .venv/bin/python benchmarks/bench_findings.py --rounds 7 --only 30k
    .venv/bin/python benchmarks/bench_findings.py --vs ../other-tree   # devlint of another tree as B

Rows (the files are written to benchmarks/.cache/findings/ once):

- ``30k``: 30,000 lines, every other one a finding (``x1 = y.cuda()``; 15k findings);
- ``100k``: 100,000 lines, each a finding (issue 24: <= 20 s CPU, <= 600 MB);
- ``50mb``: 877k lines of 55 characters, each a finding (issue 24: finishes within the stated
  memory budget, ``devlint.memory_budget.MEMORY_BUDGET_MB``; the lines past it are one DEV000).

Each run is one process timed by the operating system (``resource.getrusage`` of the child:
user + system CPU, its peak RSS); the output goes to a file (``--output-format concise``), so
writing to a terminal is not timed. ruff is the one next to this interpreter (``pip install
ruff`` in the venv; it is no dependency of devlint); its row is left out when it is missing.
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "findings"
PY = Path(sys.executable)


def _write(name: str, lines: list[str]) -> Path:
    path = CACHE / name
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def inputs() -> dict[str, Path]:
    """The generated files, by row name."""
    dense = ["import torch", ""]
    for i in range(15_000):
        dense += [f"x{i} = y.cuda()", f"z{i} = {i}"]
    return {
        "30k": _write("many30k.py", dense[:30_000]),
        "100k": _write("each100k.py", ["import torch", *(f"x{i} = y.cuda()" for i in range(100_000))]),
        "50mb": _write("big50mb.py", ["import torch", *(f"output_tensor_{i:07d} = some_input_tensor_value.cuda()"
                                                          for i in range(877_000))]),
    }


def timed(cmd: list[str], out: Path) -> tuple[float, float]:
    """(CPU seconds, peak RSS MB) of one run of ``cmd`` in a fresh child process."""
    probe = ("import resource, subprocess, sys; subprocess.call(sys.argv[2:], stdout=open(sys.argv[1], 'w'), "
             "stderr=subprocess.DEVNULL); r = resource.getrusage(resource.RUSAGE_CHILDREN); "
             "print(r.ru_utime + r.ru_stime, r.ru_maxrss)")
    got = subprocess.run([str(PY), "-c", probe, str(out), *cmd], capture_output=True, text=True, check=True)
    cpu, kb = got.stdout.split()
    return float(cpu), int(kb) / 1024


def devlint_cmd(tree: Path | None, path: Path) -> list[str]:
    args = ["check", "--no-cache", "--isolated", "--exit-zero", "--output-format", "concise", str(path)]
    if tree is None:
        return [str(PY), "-m", "devlint", *args]
    code = f"import sys; sys.path.insert(0, {str(tree)!r}); from devlint.cli import main; sys.exit(main(sys.argv[1:]))"
    return [str(PY), "-c", code, *args]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--only", action="append", choices=["30k", "100k", "50mb"], help="rows to run (repeatable)")
    ap.add_argument("--vs", type=Path, help="another devlint source tree as B (instead of ruff)")
    args = ap.parse_args()
    ruff = shutil.which("ruff", path=str(PY.parent))
    rows = []
    for name, path in inputs().items():
        if args.only and name not in args.only:
            continue
        a = devlint_cmd(None, path)
        if args.vs is not None:
            b, b_name = devlint_cmd(args.vs.resolve(), path), f"devlint ({args.vs})"
        elif ruff:
            b, b_name = [ruff, "check", "--isolated", "--no-cache", "--select", "ALL", "--exit-zero", str(path)], "ruff ALL"
        else:
            b, b_name = None, ""
        runs: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
        for i in range(args.rounds):
            runs["A"].append(timed(a, CACHE / "a.out"))
            if b is not None:
                runs["B"].append(timed(b, CACHE / "b.out"))
            print(f"[bench] {name} round {i + 1}/{args.rounds}: A {runs['A'][-1]}"
                  + (f" B {runs['B'][-1]}" if b is not None else ""), file=sys.stderr, flush=True)
        found = sum(1 for _ in open(CACHE / "a.out", encoding="utf-8"))
        rows.append((name, found, runs, b_name))
    print("| file | findings | devlint CPU s min / median | peak MB max | B | B CPU s min / median | ratio of minima |")
    print("|---|---|---|---|---|---|---|")
    for name, found, runs, b_name in rows:
        cpu = [c for c, _ in runs["A"]]
        line = f"| {name} | {found:,} | {min(cpu):.2f} / {statistics.median(cpu):.2f} | {max(m for _, m in runs['A']):.0f} |"
        if runs["B"]:
            other = [c for c, _ in runs["B"]]
            line += f" {b_name} | {min(other):.2f} / {statistics.median(other):.2f} | {min(cpu) / min(other):.2f} |"
        else:
            line += " - | - | - |"
        print(line)
    print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end, {args.rounds} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
