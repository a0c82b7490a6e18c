"""Time ``devlint runtime`` on the built-in reference step, torch import included.

    python benchmarks/bench_runtime.py [-n 5] [--device cpu]

Runs the command N times as a fresh subprocess (``devlint runtime`` when ``devlint`` is on
PATH, else ``python -m devlint.runtime``) and prints a table of the wall times and the median,
next to a baseline of ``python -c "import torch"`` (so a loaded machine can be read).
Target: median under 3 s on a 2-core CPU machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time


def command(devices: list[str]) -> list[str]:
    """The command to time: the installed ``devlint`` next to this Python, else ``-m``."""
    exe = shutil.which("devlint", path=os.path.dirname(sys.executable)) or shutil.which("devlint")
    base = [exe, "runtime"] if exe else [sys.executable, "-m", "devlint.runtime"]
    for d in devices:
        base += ["--device", d]
    return base


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="number of runs (default 5)")
    parser.add_argument("--device", action="append", default=[], help="passed to devlint runtime")
    args = parser.parse_args(argv)
    cmd = command(args.device)
    baseline = [sys.executable, "-c", "import torch"]
    times, base = [], []
    for _ in range(args.n):
        start = time.perf_counter()
        subprocess.run(baseline, capture_output=True)
        base.append(time.perf_counter() - start)
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            if "invalid choice: 'runtime'" in proc.stderr and cmd[1] == "runtime":
                cmd = [sys.executable, "-m", "devlint.runtime", *cmd[2:]]
                continue
            print(f"bench_runtime: {' '.join(cmd)} exited {proc.returncode}: "
                  f"{proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 2
    print(f"command: {' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd))}")
    print(f"{'run':>6}  {'wall s':>7}  {'import torch s':>14}")
    for i, (t, b) in enumerate(zip(times, base), 1):
        print(f"{i:>6}  {t:7.2f}  {b:14.2f}")
    print(f"{'median':>6}  {statistics.median(times):7.2f}  {statistics.median(base):14.2f}"
          f"  ({os.cpu_count()} CPUs, target: under 3 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
