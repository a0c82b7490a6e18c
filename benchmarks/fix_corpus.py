#!/usr/bin/env python3
"""``devlint check --fix`` over a copy of real code (issue 15): does it change only what it
reports, compile everywhere, and change nothing the second time?

    .venv/bin/python benchmarks/fix_corpus.py                    # the benchmark's corpora
    .venv/bin/python benchmarks/fix_corpus.py accelerate==1.1.1  # any name==version

Each wheel is downloaded once into benchmarks/.cache/wheels and unpacked to a temporary copy;
the CLI fixes the copy in place (``--fix --no-cache``), then every file is compared with the
original. Prints one Markdown row per corpus:

- files / changed / fixes: Python files, files the fix rewrote, fixes the CLI says it applied;
- outside: changed lines that no fix edit of the original's findings covers (must be 0);
- broken: rewritten files that no longer compile, of those that compiled (must be 0);
- 2nd run: files a second ``--fix`` changes (must be 0).
"""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WHEELS = HERE / ".cache" / "wheels"
DEFAULT = ["accelerate==1.1.1", "timm==1.0.11", "ultralytics==8.3.40", "transformers==4.46.3"]


def wheel(spec: str) -> Path:
    name, version = spec.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(WHEELS.glob(pattern))
    if not found:
        WHEELS.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                        "-d", str(WHEELS), spec], check=True)
        found = sorted(WHEELS.glob(pattern))
    return found[0]


def compiles(data: bytes) -> bool:
    try:
        compile(data, "<corpus>", "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError, RecursionError
        return False
    return True


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py")) if p.is_file()}


def fix_run(root: Path) -> tuple[int, str]:
    result = subprocess.run([sys.executable, "-m", "devlint", "check", "--fix", "--no-cache", "--isolated",
                             "--exit-zero", "."], cwd=root, capture_output=True, text=True)
    if result.returncode != 0 or "Traceback" in result.stderr:
        raise SystemExit(f"devlint failed ({result.returncode}): {result.stderr[-2000:]}")
    match = re.search(r"Fixed (\d+) finding", result.stdout)
    return (int(match.group(1)) if match else 0), result.stdout


def check(spec: str) -> dict:
    from devlint import source
    from devlint.runner import check_source

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / spec.split("==")[0]
        with zipfile.ZipFile(wheel(spec)) as archive:
            archive.extractall(root)
        before = files(root)
        fixes, _ = fix_run(root)
        after = files(root)
        changed = [name for name in before if after.get(name) != before[name]]
        outside, broken = [], []
        for name in changed:
            old, new = before[name], after[name]
            if compiles(old) and not compiles(new):
                broken.append(name)
            covered = {n for f in check_source(old, str(root / name), ["DEV"], []) if f.fix is not None
                       for e in f.fix.edits for n in range(e.line, e.end_line + 1)}
            old_lines = source.split_lines(source.decode(old).text)
            new_lines = source.split_lines(source.decode(new).text)
            for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
                if tag != "equal":
                    outside += [f"{name}:{n}" for n in range(i1 + 1, max(i2, i1 + 1) + 1) if n not in covered]
        again, _ = fix_run(root)
        second = [name for name, data in files(root).items() if after.get(name) != data]
    return {"corpus": spec, "files": len(before), "changed": len(changed), "fixes": fixes,
            "outside": outside, "broken": broken, "second": second, "second_fixes": again}


def main(argv: list[str]) -> int:
    specs = argv or DEFAULT
    print("| corpus | files | changed | fixes | outside | broken | 2nd run |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    bad = 0
    for spec in specs:
        row = check(spec)
        print(f"| {row['corpus']} | {row['files']} | {row['changed']} | {row['fixes']} | {len(row['outside'])} "
              f"| {len(row['broken'])} | {len(row['second'])} ({row['second_fixes']} fixes) |", flush=True)
        for name in [*row["outside"][:5], *row["broken"][:5], *row["second"][:5]]:
            print(f"    {name}", file=sys.stderr)
        bad += bool(row["outside"] or row["broken"] or row["second"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
