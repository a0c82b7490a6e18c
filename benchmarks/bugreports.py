#!/usr/bin/env python3
"""Recall on public bug reports: devlint over ``fixtures/lint/bugreports/``, report by report.

Run it by hand with the interpreter of the venv that has devlint installed:

    .venv/bin/python benchmarks/bugreports.py            # markdown table, then the totals
    .venv/bin/python benchmarks/bugreports.py --misses   # only the reports devlint misses

Each ``brNN_<name>.py`` restates, in code written here, the construct a public bug report or
fixing pull request names as the cause (its first comment line is ``# Report: URL``, the next
says the cause); ``brNN_<name>_ok.py`` is the same code with the report's fix applied. Marks:

- ``# expect: CODE`` must be reported on that line (``tests/test_fixtures.py`` holds devlint to it);
- ``# missed: CODE (cause)`` is a known miss: counted here as expected and not caught, and left out
  of the fixture tests (a finding there fails them, which is the sign to turn it into ``expect``).

A report counts as caught when every expected line of its file is reported with its code. A clean
twin counts as flagged when devlint reports anything at all in it. Output: one row a report (URL,
codes expected, caught y/n), then ``flagged N of M, clean twins with findings K``. Exit status 0,
or 1 when a clean twin has a finding. Standard library only.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FOLDER = HERE.parent / "fixtures" / "lint" / "bugreports"
MARK = re.compile(r"#\s*(expect|missed):\s*([A-Z0-9|]+)")
REPORT = re.compile(r"#\s*Report:\s*(\S+)")
FINDING = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+):\s*(?P<code>DEV\d+)")


def expected(text: str) -> list[tuple[int, frozenset[str]]]:
    """``[(line, alternative codes)]`` of the ``expect``/``missed`` marks in ``text``."""
    return [(no, frozenset(m[1].split("|"))) for no, line in enumerate(text.splitlines(), 1)
            for m in MARK.findall(line)]


def findings(folder: Path) -> dict[str, set[tuple[int, str]]]:
    """``{file name: {(line, code)}}`` of one devlint run over ``folder`` (no cache)."""
    env_cmd = [sys.executable, "-m", "devlint", "check", "--no-cache", "--output-format", "concise", str(folder)]
    out = subprocess.run(env_cmd, capture_output=True, text=True, check=False).stdout
    found: dict[str, set[tuple[int, str]]] = {}
    for line in out.splitlines():
        m = FINDING.match(line)
        if m:
            found.setdefault(Path(m["path"]).name, set()).add((int(m["line"]), m["code"]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misses", action="store_true", help="list only the reports that are missed")
    args = parser.parse_args(argv)
    found = findings(FOLDER)
    reports = sorted(p for p in FOLDER.glob("br*.py") if not p.name.endswith("_ok.py"))
    twins = sorted(FOLDER.glob("br*_ok.py"))
    caught = 0
    print("| report | expected | caught |\n|---|---|---|")
    for path in reports:
        text = path.read_text(encoding="utf-8")
        url = REPORT.search(text)[1]
        marks = expected(text)
        got = found.get(path.name, set())
        ok = bool(marks) and all(any((no, c) in got for c in alts) for no, alts in marks)
        caught += ok
        codes = ", ".join(sorted({"|".join(sorted(alts)) for _, alts in marks}))
        if not (args.misses and ok):
            print(f"| {url} | {codes} | {'y' if ok else 'n'} |")
    noisy = [p.name for p in twins if found.get(p.name)]
    print(f"\nflagged {caught} of {len(reports)}, clean twins with findings {len(noisy)} of {len(twins)}")
    for name in noisy:
        print(f"  {name}: {sorted(found[name])}")
    return 1 if noisy else 0


if __name__ == "__main__":
    raise SystemExit(main())
