#!/usr/bin/env python3
"""Side-by-side linter benchmark (issues 7 and 14): devlint next to the parse floors (bare
libcst, bare ast), ruff --select=ALL, TorchFix and flake8, in CPU time; a scaling table in
file size; the share of files libcst parses; the findings with and without the ast pre-check.

Run with the interpreter of the venv that has devlint installed (and ruff, for its row:
``pip install ruff``; it is no dependency of devlint):

    .venv/bin/python benchmarks/bench_lint.py            # the five corpora, median of 3
    .venv/bin/python benchmarks/bench_lint.py --quick    # timm + accelerate, 1 run

Everything downloaded or built goes to benchmarks/.cache/ (git-ignored) and is reused.
Standard library only; see benchmarks/README.md for what the columns mean.
"""
import argparse
import datetime
import importlib.metadata as md
import os
import platform
import shutil
import statistics
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
CORPUS_DIR = CACHE / "corpus"
CORPORA = {"timm": "1.0.11", "accelerate": "1.1.1", "ultralytics": "8.3.40", "lightning": "2.4.0",
           "diffusers": "0.31.0", "transformers": "4.46.3"}
DEFAULT = ("timm", "accelerate", "ultralytics", "lightning", "diffusers")
QUICK = ("timm", "accelerate")
SCALES = (2_000, 10_000, 60_000, 100_000)  # issue 27: per line at 100k / at 2k <= 1.2
PY = Path(sys.executable)  # our venv: devlint, flake8, libcst
BIN = PY.parent
TORCHFIX = "torchfix==0.7.0"

# Prints "<stage> <path>" for each file: "text" (passes the text pre-screen), "parsed" (the ast
# pre-check leaves a rule for libcst).
PRESCREEN = """import sys
from devlint import precheck
from devlint.engine import enabled_rules, triggered
from devlint.source import decode
rules = enabled_rules()
for p in open(sys.argv[1]).read().splitlines():
    try:
        text = decode(open(p, 'rb').read()).text
    except Exception:
        continue
    kept = triggered(text, rules)
    if kept:
        print('text', p)
        if precheck.candidates(text, kept)[0]:
            print('parsed', p)
"""
# A bare parse of the files in argv[1], decoded the way devlint decodes them: argv[2] is
# "libcst", "libcst-nogc" (the collector off, as devlint runs it) or "ast".
BARE = """import gc, io, sys, tokenize, ast, libcst
parse = ast.parse if sys.argv[2] == 'ast' else libcst.parse_module
if sys.argv[2].endswith('nogc'):
    gc.disable()
for p in open(sys.argv[1]).read().splitlines():
    data = open(p, 'rb').read()
    enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    try:
        parse(data.decode(enc).removeprefix('\\ufeff'))
    except Exception:
        pass
"""
# Scaling: argv[1] is a file of real code, argv[2] a size; lints it as pieces of about that
# many lines (cut between top-level statements, so every size covers the same code) and prints
# "<lines> <CPU s> <peak RSS MB> <bare libcst CPU s or -1> <CPU s in devlint's libcst parse>
# <rules run per line>" (the parse share is timed around parsing.parse_module, which every
# piece devlint parses goes through; the rest is devlint's own work).
SCALE = """import gc, json, resource, subprocess, sys, time
from devlint import engine, parsing
parse_cpu = [0.0]
_parse_module = parsing.parse_module
def timed_parse(text):
    t = time.process_time()
    try:
        return _parse_module(text)
    finally:
        parse_cpu[0] += time.process_time() - t
parsing.parse_module = timed_parse
text = open(sys.argv[1], encoding='utf-8').read()
size = int(sys.argv[2])
lines = text.split('\\n')
# the cuts come from another process: the stdlib tree of 200k lines (~500 MB) would set this
# process's peak RSS before devlint runs
cuts = json.loads(subprocess.run([sys.executable, '-c', 'import ast, json, sys; from devlint import parsing; '
    'print(json.dumps(parsing.cuts_by_tree(ast.parse(open(sys.argv[1], encoding=\\'utf-8\\').read()), int(sys.argv[2])) or [0]))',
    sys.argv[1], sys.argv[2]], capture_output=True, text=True, check=True).stdout)
bounds = [*cuts, len(lines)]
pieces = ['\\n'.join(lines[a:b]) + '\\n' for a, b in zip(bounds, bounds[1:])]
cpu = 0.0
rules = engine.enabled_rules()
run = sum(len(engine.triggered(piece, rules)) * piece.count('\\n') for piece in pieces)
for piece in pieces:
    t = time.process_time()
    engine.lint(piece, 'scale.py', precheck=False)
    cpu += time.process_time() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
bare = -1.0
if len(sys.argv) > 3:
    import libcst
    gc.disable()
    t = time.process_time()
    for piece in pieces:
        libcst.parse_module(piece)
    bare = time.process_time() - t
n = sum(p.count('\\n') for p in pieces)
print(n, cpu, peak, bare, parse_cpu[0], run / n)
"""
# Fallback when /usr/bin/time is missing: a fresh process whose RUSAGE_CHILDREN is only the tool.
WRAP = ("import resource, subprocess, sys, time; t = time.perf_counter(); rc = subprocess.call(sys.argv[2:]); "
        "r = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "open(sys.argv[1], 'w').write('%.2f %.2f %.2f %d' % (time.perf_counter() - t, r.ru_utime, r.ru_stime, r.ru_maxrss)); "
        "sys.exit(rc)")


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def corpus(name, version):
    """Unzipped wheel of name==version under .cache/corpus/<name>, downloaded once."""
    dest, wheels = CORPUS_DIR / name, CACHE / "wheels"
    if not (dest / ".done").exists():
        wheels.mkdir(parents=True, exist_ok=True)
        found = [w for w in wheels.glob(f"*-{version}-*.whl") if w.name.lower().startswith(name + "-")]
        if not found:
            log(f"downloading {name}=={version}")
            run([PY, "-m", "pip", "download", "-q", "--no-deps", "-d", wheels, f"{name}=={version}"])
            found = [w for w in wheels.glob(f"*-{version}-*.whl") if w.name.lower().startswith(name + "-")]
        shutil.rmtree(dest, ignore_errors=True)
        zipfile.ZipFile(found[0]).extractall(dest)
        (dest / ".done").touch()
    return dest


def venv(name, *attempts):
    """A helper venv under .cache/<name>; each attempt is a pip argument list, tried in order."""
    home = CACHE / name
    if not (home / ".done").exists():
        for args in attempts:
            log(f"creating venv {name}: pip install {' '.join(args)}")
            shutil.rmtree(home, ignore_errors=True)
            run([PY, "-m", "venv", home])
            if subprocess.run([home / "bin" / "python", "-m", "pip", "install", "-q", *args]).returncode == 0:
                (home / ".done").touch()
                break
        else:
            sys.exit(f"could not create venv {name}")
    return home / "bin"


def measure(label, cmd, runs, files_note):
    """Median wall and CPU seconds, peak RSS (MB, the largest single process) over `runs` runs."""
    stats, out = CACHE / "time.txt", CACHE / "out"
    out.mkdir(exist_ok=True)
    prefix = ["/usr/bin/time", "-f", "%e %U %S %M", "-o"] if os.access("/usr/bin/time", os.X_OK) else [PY, "-c", WRAP]
    walls, cpus, rss = [], [], []
    for i in range(runs):
        slug = "".join(c if c.isalnum() else "_" for c in label)
        with open(out / f"{slug}.out", "w") as so, open(out / f"{slug}.err", "w") as se:
            rc = subprocess.run([str(c) for c in [*prefix, stats, *cmd]], cwd=CORPUS_DIR, stdout=so, stderr=se)
            rc = rc.returncode
        wall, user, system, kb = open(stats).read().split()[-4:]
        walls.append(float(wall))
        cpus.append(float(user) + float(system))
        rss.append(int(kb) / 1024)
        lines = sum(1 for _ in open(out / f"{slug}.out"))
        log(f"{label}: run {i + 1}/{runs}: {walls[-1]:.2f} s ({cpus[-1]:.2f} s CPU), {rss[-1]:.0f} MB, "
            f"rc={rc}, {lines} output lines")
        if rc not in (0, 1):
            log(f"  WARNING: exit status {rc}; stderr tail: {open(out / f'{slug}.err').read()[-500:]!r}")
    return [label, *files_note, statistics.median(walls), max(rss), statistics.median(cpus)]


def help_text(cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True).stdout


def machine():
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?") \
        if os.path.exists("/proc/cpuinfo") else platform.processor()
    try:
        head = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        head = "?"
    load = "load average %.1f at start" % os.getloadavg()[0]
    return (f"{os.cpu_count()} CPUs ({model}), {load}, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}; "
            f"devlint {md.version('devlint')} (git {head or '?'}), libcst {md.version('libcst')}, flake8 {md.version('flake8')}")


def scaling_source(files):
    """The real code the scaling table lints: the corpus files that mention torch, whole and in
    order, without ``from __future__`` lines (legal only at the top of a file), until there are
    enough lines for the largest size. Written once to .cache/scaling.py."""
    path = CACHE / "scaling.py"
    want = max(SCALES)
    if not path.exists() or path.read_text(encoding="utf-8").count("\n") < want:
        import ast
        out, count = [], 0
        for f in files:
            text = (CORPUS_DIR / f).read_text(encoding="utf-8", errors="replace")
            if "torch" not in text:
                continue
            text = "\n".join(ln for ln in text.split("\n") if not ln.startswith("from __future__ import"))
            text = text if text.endswith("\n") else text + "\n"
            try:
                ast.parse(text)
            except SyntaxError:
                continue
            out.append(text)
            count += text.count("\n")
            if count >= want:
                break
        path.write_text("".join(out), encoding="utf-8")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", choices=sorted(CORPORA), help="corpus to use (repeatable; default: "
                    + " + ".join(DEFAULT) + ")")
    ap.add_argument("--quick", action="store_true", help=f"smoke run: {' + '.join(QUICK)}, 1 run unless --runs")
    ap.add_argument("--runs", type=int, help="runs per tool, median reported (default 3)")
    ap.add_argument("--torchfix-runs", type=int, help="runs for TorchFix alone, the slowest (default: --runs)")
    ap.add_argument("--skip-torchfix", action="store_true", help="do not install or run TorchFix")
    ap.add_argument("--skip-scaling", action="store_true", help="no scaling table")
    ap.add_argument("--output", type=Path, default=HERE / "results.md")
    args = ap.parse_args()
    names = args.corpus or (list(QUICK) if args.quick else list(DEFAULT))
    runs = args.runs or (1 if args.quick else 3)
    setup = machine()  # before the runs: the tree may change while they go

    roots = [corpus(n, CORPORA[n]) for n in names]
    files = sorted(str(p.relative_to(CORPUS_DIR)) for r in roots for p in r.rglob("*.py"))
    all_list, torch_list = CACHE / "files-all.txt", CACHE / "files-torch.txt"
    all_list.write_text("\n".join(files) + "\n")
    blobs = {f: (CORPUS_DIR / f).read_bytes() for f in files}
    lines = sum(b.count(b"\n") for b in blobs.values())
    torchy = [f for f in files if b"torch" in blobs[f]]  # TorchFix's own pre-screen
    torch_list.write_text("\n".join(torchy) + "\n")
    torch_lines = sum(blobs[f].count(b"\n") for f in torchy)
    stages = run([PY, "-c", PRESCREEN, all_list], cwd=CORPUS_DIR, capture_output=True, text=True).stdout.split("\n")
    screened = [ln.split(" ", 1)[1] for ln in stages if ln.startswith("text ")]
    parsed = [ln.split(" ", 1)[1] for ln in stages if ln.startswith("parsed ")]
    parsed_lines = sum(blobs[f].count(b"\n") for f in parsed)
    log(f"{', '.join(names)}: {len(files)} files, {lines} lines, {len(torchy)} mention 'torch', {len(screened)} pass "
        f"the text pre-screen, {len(parsed)} ({parsed_lines} lines) are parsed by libcst after the ast pre-check")

    plain = venv("venv-flake8", [f"flake8=={md.version('flake8')}"])
    flake8_pin = f"flake8=={md.version('flake8')}"
    tf = None if args.skip_torchfix else venv(
        "venv-torchfix", [TORCHFIX, flake8_pin],
        ["--no-deps", TORCHFIX, flake8_pin, "pyflakes", "pycodestyle", "mccabe", "libcst>=1.5,<1.6", "PyYAML"])
    ruff = BIN / "ruff" if (BIN / "ruff").exists() else shutil.which("ruff")

    dl = [BIN / "devlint", "check", "--no-cache", "--isolated"]
    everything = (len(files), lines)
    rows = []
    rows.append(measure("devlint check -j 1", [*dl, "-j", "1", *files], runs, (*everything, len(parsed))))
    os.environ["DEVLINT_NO_PRECHECK"] = "1"
    rows.append(measure("devlint check -j 1, no ast pre-check", [*dl, "-j", "1", *files], runs,
                        (*everything, len(screened))))
    del os.environ["DEVLINT_NO_PRECHECK"]
    rows.append(measure("devlint check (default -j)", [*dl, *files], runs, (*everything, len(parsed))))
    rows.append(measure("bare libcst.parse_module (torch files)", [PY, "-c", BARE, torch_list, "libcst"], runs,
                        (len(torchy), torch_lines, len(torchy))))
    rows.append(measure("bare libcst.parse_module, collector off", [PY, "-c", BARE, torch_list, "libcst-nogc"], runs,
                        (len(torchy), torch_lines, len(torchy))))
    rows.append(measure("bare ast.parse (all files)", [PY, "-c", BARE, all_list, "ast"], runs,
                        (*everything, len(files))))
    if ruff:
        rows.append(measure("ruff check --select=ALL", [ruff, "check", "--select=ALL", "--no-cache", "--isolated",
                                                        "--exit-zero", *files], runs, (*everything, len(files))))
    if tf:
        rows.append(measure("torchfix (default -j)", [tf / "torchfix", *files], args.torchfix_runs or runs,
                            (*everything, len(torchy))))
    rows.append(measure("flake8 -j 1 --select=E9, devlint installed", [BIN / "flake8", "-j", "1", "--isolated",
                                                                      "--select=E9", *files], runs, (*everything, len(files))))
    rows.append(measure("flake8 -j 1 --select=E9 alone", [plain / "flake8", "-j", "1", "--isolated", "--select=E9", *files],
                        runs, (*everything, len(files))))
    rows.append(measure("flake8 -j 1 --select=E9,DEV", [BIN / "flake8", "-j", "1", "--isolated", "--select=E9,DEV", *files],
                        runs, (*everything, len(parsed))))

    rows.append(measure("devlint --version (start-up)", [BIN / "devlint", "--version"], max(runs, 5), (0, 0, 0)))

    by = {r[0]: r for r in rows}
    j1, j1_off = by["devlint check -j 1"], by["devlint check -j 1, no ast pre-check"]
    bare, bare_nogc = by["bare libcst.parse_module (torch files)"], by["bare libcst.parse_module, collector off"]
    ratios = [
        ("devlint -j 1, no pre-check / bare libcst", j1_off, bare, "<= 1.1"),
        ("devlint -j 1 / bare libcst", j1, bare, "<= 0.7"),
        ("devlint -j 1, no pre-check / bare libcst, collector off", j1_off, bare_nogc, ""),
        ("devlint -j 1 / bare libcst, collector off", j1, bare_nogc, ""),
        ("devlint -j 1 / bare ast", j1, by["bare ast.parse (all files)"], ""),
    ]
    if ruff:
        ratios.append(("devlint -j 1 / ruff ALL", j1, by["ruff check --select=ALL"], "<= 2"))
    if tf:
        ratios.append(("devlint -j 1 / torchfix", j1, by["torchfix (default -j)"], "<= 0.2"))
    ratios.append(("flake8 E9 with devlint / alone", by["flake8 -j 1 --select=E9, devlint installed"],
                   by["flake8 -j 1 --select=E9 alone"], "<= 1.05"))
    ratios.append(("flake8 E9,DEV / E9 alone", by["flake8 -j 1 --select=E9,DEV"], by["flake8 -j 1 --select=E9 alone"], ""))

    def ok(value, target):
        if not target:
            return ""
        return "yes" if value <= float(target.split()[-1]) else "**no**"

    table = ["| tool | files | lines | files parsed | median CPU s | median wall s | peak RSS MB |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    table += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[6]:.2f} | {r[4]:.2f} | {r[5]:.0f} |" for r in rows]
    table += ["", "| ratio (CPU time) | value | target | met |", "|---|--:|--:|:-:|"]
    table += [f"| {name} | {a[6] / b[6]:.2f} | {t} | {ok(a[6] / b[6], t)} |" for name, a, b, t in ratios]
    start = by["devlint --version (start-up)"]
    table += [f"| devlint --version, median wall s (CPU s) | {start[4]:.2f} ({start[6]:.2f}) | <= 0.2 | {ok(start[4], '<= 0.2')} |"]

    out = CACHE / "out"
    with_check = sorted(ln for ln in (out / "devlint_check__j_1.out").read_text().splitlines() if ": DEV" in ln)
    without = sorted(ln for ln in (out / "devlint_check__j_1__no_ast_pre_check.out").read_text().splitlines() if ": DEV" in ln)
    same = with_check == without
    table += ["", f"Files parsed by libcst: {len(parsed)} of {len(files)} ({len(parsed) / len(files):.0%}; "
              f"{parsed_lines / lines:.0%} of the lines); {len(screened)} pass the text pre-screen, {len(torchy)} mention torch.",
              f"Findings with and without the ast pre-check (devlint check -j 1): {len(with_check)} and {len(without)}, "
              + ("identical." if same else "**different**: diff .cache/out/devlint_check__j_1*.out")]

    if not args.skip_scaling:
        source = scaling_source(files)
        table += ["", f"Scaling in file size ({source.name}: {max(SCALES)} lines of the corpus's torch files; each size "
                  "lints the same code cut into pieces of that many lines, pre-check off so that every piece is parsed):", "",
                  "| lines per file | files | devlint µs/line | of it libcst parse | of it devlint's own | rules run per line | bare libcst µs/line | peak RSS MB |",
                  "|--:|--:|--:|--:|--:|--:|--:|--:|"]
        per_line, own = {}, {}
        for size in SCALES:
            got = run([PY, "-c", SCALE, source, size, "bare"], capture_output=True, text=True).stdout.split()
            n, cpu, peak, bare_cpu, parse_cpu, rules_run = int(got[0]), *map(float, got[1:6])
            count = max(1, round(n / size))
            per_line[size], own[size] = cpu / n * 1e6, (cpu - parse_cpu) / n * 1e6
            log(f"scaling {size}: {per_line[size]:.0f} µs/line ({own[size]:.0f} outside the parse), {peak:.0f} MB")
            table.append(f"| {size} | {count} | {per_line[size]:.0f} | {parse_cpu / n * 1e6:.0f} | {own[size]:.0f} | {rules_run:.1f} | "
                         f"{bare_cpu / n * 1e6:.0f} | {peak:.0f} |")
        big, small = per_line[max(SCALES)], per_line[min(SCALES)]
        table += ["", f"| ratio | value | target | met |", "|---|--:|--:|:-:|",
                  f"| µs/line at {max(SCALES)} / at {min(SCALES)} | {big / small:.2f} | <= 1.2 | {ok(big / small, '<= 1.2')} |",
                  f"| devlint's own µs/line (outside the parse) at {max(SCALES)} / at {min(SCALES)} | {own[max(SCALES)] / own[min(SCALES)]:.2f} |  |  |"]
    text = "\n".join(table)
    print(text)

    cmdline = " ".join(["python", "benchmarks/bench_lint.py", *sys.argv[1:]])
    head = [
        "# devlint lint benchmark", "",
        f"- date: {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}",
        f"- machine: {setup}",
        f"- command: `{cmdline}` (median of {runs} run{'s' * (runs > 1)}"
        f"{f', TorchFix {args.torchfix_runs}' if tf and args.torchfix_runs else ''})",
        f"- corpora: {', '.join(f'{n}=={CORPORA[n]}' for n in names)}: {len(files)} files, {lines} lines, "
        f"{len(torchy)} mention 'torch' ({torch_lines} lines)",
        f"- versions: ruff {md.version('ruff') if ruff else 'absent'}, {TORCHFIX if tf else 'TorchFix skipped'}",
        "", "Regenerate with the command above; column meanings are in benchmarks/README.md.", "", "",
    ]
    args.output.write_text("\n".join(head) + text + "\n")
    log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
