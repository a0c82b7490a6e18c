#!/usr/bin/env python3
"""Judged corpus of training scripts: devlint over ``benchmarks/scripts/``, scored against the marks.

Run it by hand with the interpreter of the venv that has devlint installed:

    .venv/bin/python benchmarks/scripts.py              # per-rule table, then every miss and false positive
    .venv/bin/python benchmarks/scripts.py --select DEV111

The corpus holds whole training/eval scripts written here around the constructs people use
(accumulation with a GradScaler, dict batches, class-based trainers, Lightning modules, DDP/FSDP,
GANs, diffusion loops, Kaggle-style helpers); none reproduces a public program (issue 22). About
half carry bugs RULES.md says must be flagged, half are correct code that naive checkers flag.
Each script's docstring says which it is.

Marks, as in ``fixtures/lint`` (``tests/conftest.py``), on the physical line of the finding:

- ``# expect: CODE`` must be reported there: a true positive when it is, a miss (fn) when it is not;
  ``# expect: A|B`` is satisfied by either code; ``# expect: A B`` needs both.
- ``# either: CODE`` marks what RULES.md says "may be reported but need not be" (and the other
  borderline cases judged in the script's comments): it is not counted either way, and the
  ``either`` column says how many of them devlint reported.
- Any other finding is a false positive (fp).

A code on one line is counted once (findings are keyed by line and code). Output: the per-rule
table (tp, fp, fn, precision tp/(tp+fp), recall tp/(tp+fn), either reported/marked), then the
misses and false positives with their lines. Exit status 0, or 1 when there is a miss or a false
positive. Standard library only; ``tests/test_scripts_corpus.py`` keeps the table exact.
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "scripts"
MARK = re.compile(r"#\s*(expect|either):\s*([A-Z0-9| ]+)")
FINDING = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+):\s*(?P<code>DEV\d+)")


def marks(text: str) -> tuple[list[tuple[int, frozenset[str]]], set[tuple[int, str]]]:
    """``(required, optional)`` from a file's text: required ``(line, alternatives)`` from
    ``# expect:``, optional ``{(line, code)}`` from ``# either:``."""
    need, maybe = [], set()
    for no, line in enumerate(text.splitlines(), 1):
        for kind, body in MARK.findall(line):
            for group in body.split():
                alts = frozenset(c for c in group.split("|") if c.startswith("DEV"))
                if not alts:
                    continue
                if kind == "expect":
                    need.append((no, alts))
                else:
                    maybe |= {(no, c) for c in alts}
    return need, maybe


def lint(paths: list[Path], select: str = "DEV") -> dict[str, set[tuple[int, str]]]:
    """``{file name: {(line, code)}}`` reported by the devlint CLI of this interpreter over ``paths``
    (``--isolated --no-cache``, so no settings or cache of the checkout change the result)."""
    cmd = [sys.executable, "-m", "devlint", "check", "--output-format", "concise", "--isolated",
           "--no-cache", "-q", "-j", "1", "--select", select, *map(str, paths)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if result.returncode not in (0, 1) or "Traceback" in result.stderr:
        raise RuntimeError(f"devlint failed ({result.returncode}):\n{result.stderr}")
    found: dict[str, set[tuple[int, str]]] = collections.defaultdict(set)
    for line in result.stdout.splitlines():
        m = FINDING.match(line)
        if m:
            found[Path(m["path"]).name].add((int(m["line"]), m["code"]))
    return found


def score(files: list[Path], found: dict[str, set[tuple[int, str]]], select: str = "DEV") -> dict:
    """Per-rule counts and the itemised misses/false positives/borderline findings.

    Returns ``{"rules": {code: {"tp", "fp", "fn", "either", "either_marked"}}, "fn": [(file, line,
    codes)], "fp": [(file, line, code)], "either": [(file, line, code)]}``; a miss of ``A|B`` is
    counted under each of A and B's names joined (``"A|B"``)."""
    rules: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    misses, false, borderline = [], [], []
    for path in files:
        need, maybe = marks(path.read_text(encoding="utf-8"))
        need = [(no, alts) for no, alts in need if any(c.startswith(select) for c in alts)]
        maybe = {(no, c) for no, c in maybe if c.startswith(select)}
        got = found.get(path.name, set())
        credited = set()
        for no, alts in need:
            hit = sorted(c for c in alts if (no, c) in got)
            if hit:
                rules[hit[0]]["tp"] += 1
                credited |= {(no, c) for c in hit}
            else:
                rules["|".join(sorted(alts))]["fn"] += 1
                misses.append((path.name, no, "|".join(sorted(alts))))
        for no, code in maybe:
            rules[code]["either_marked"] += 1
        for no, code in sorted(got):
            if (no, code) in credited:
                continue
            if (no, code) in maybe:
                rules[code]["either"] += 1
                borderline.append((path.name, no, code))
            elif not any(no == n and code in alts for n, alts in need):
                rules[code]["fp"] += 1
                false.append((path.name, no, code))
    return {"rules": {k: dict(v) for k, v in sorted(rules.items())}, "fn": misses, "fp": false,
            "either": borderline}


def _ratio(num: int, den: int) -> str:
    return f"{num / den:.3f}" if den else "-"


def table(result: dict) -> str:
    """The per-rule table as aligned text (one row per code, then the total)."""
    head = f"{'rule':<14}{'tp':>5}{'fp':>5}{'fn':>5}{'precision':>11}{'recall':>8}{'either':>10}"
    rows = [head, "-" * len(head)]
    total = collections.Counter()
    for code, c in result["rules"].items():
        tp, fp, fn = c.get("tp", 0), c.get("fp", 0), c.get("fn", 0)
        either = f"{c.get('either', 0)}/{c.get('either_marked', 0)}"
        rows.append(f"{code:<14}{tp:>5}{fp:>5}{fn:>5}{_ratio(tp, tp + fp):>11}{_ratio(tp, tp + fn):>8}{either:>10}")
        total.update(c)
    tp, fp, fn = total["tp"], total["fp"], total["fn"]
    rows.append("-" * len(head))
    either = f"{total['either']}/{total['either_marked']}"
    rows.append(f"{'all':<14}{tp:>5}{fp:>5}{fn:>5}{_ratio(tp, tp + fp):>11}{_ratio(tp, tp + fn):>8}{either:>10}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--select", default="DEV", help="only codes with this prefix (default: DEV)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="folder of marked scripts")
    args = parser.parse_args(argv)
    files = sorted(args.corpus.glob("*.py"))
    result = score(files, lint(files, args.select), args.select)
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files)
    print(f"corpus: {len(files)} scripts, {lines} lines ({args.corpus})\n")
    print(table(result))
    for title, key in (("misses (fn)", "fn"), ("false positives (fp)", "fp"),
                       ("borderline, reported (either)", "either")):
        if result[key]:
            print(f"\n{title}:")
            for name, no, code in result[key]:
                print(f"  {name}:{no}: {code}")
    return 1 if result["fn"] or result["fp"] else 0


if __name__ == "__main__":
    sys.exit(main())
