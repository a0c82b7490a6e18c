#!/usr/bin/env python3
"""Side-by-side linter benchmark (issue 7): devlint vs TorchFix vs flake8 vs a bare libcst parse.

Run with the interpreter of the venv that has devlint installed:

    .venv/bin/python benchmarks/bench_lint.py            # all four corpora, median of 3
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
CORPORA = {"transformers": "4.46.3", "timm": "1.0.11", "accelerate": "1.1.1", "ultralytics": "8.3.40"}
QUICK = ("timm", "accelerate")
PY = Path(sys.executable)  # our venv: devlint, flake8, libcst
BIN = PY.parent
TORCHFIX = "torchfix==0.7.0"

# Prints the files devlint's pre-screen lets through to the libcst parser.
PRESCREEN = """import sys
from devlint.engine import could_match, decode, enabled_rules
rules = enabled_rules()
for p in open(sys.argv[1]).read().splitlines():
    try:
        text = decode(open(p, 'rb').read())
    except Exception:
        continue
    if could_match(text, rules):
        print(p)
"""
# A bare libcst parse of the files in argv[1], decoded the way devlint decodes them.
BARE = """import io, sys, tokenize, libcst
for p in open(sys.argv[1]).read().splitlines():
    data = open(p, 'rb').read()
    enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    try:
        libcst.parse_module(data.decode(enc).removeprefix('\\ufeff'))
    except Exception:
        pass
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", choices=sorted(CORPORA), help="corpus to use (repeatable; default: all)")
    ap.add_argument("--quick", action="store_true", help=f"smoke run: {' + '.join(QUICK)}, 1 run unless --runs")
    ap.add_argument("--runs", type=int, help="runs per tool, median reported (default 3)")
    ap.add_argument("--torchfix-runs", type=int, help="runs for TorchFix alone, the slowest (default: --runs)")
    ap.add_argument("--skip-torchfix", action="store_true", help="do not install or run TorchFix")
    ap.add_argument("--output", type=Path, default=HERE / "results.md")
    args = ap.parse_args()
    names = args.corpus or (list(QUICK) if args.quick else list(CORPORA))
    runs = args.runs or (1 if args.quick else 3)
    setup = machine()  # before the runs: the tree may change while they go

    roots = [corpus(n, CORPORA[n]) for n in names]
    files = sorted(str(p.relative_to(CORPUS_DIR)) for r in roots for p in r.rglob("*.py"))
    all_list, parsed_list = CACHE / "files-all.txt", CACHE / "files-parsed.txt"
    all_list.write_text("\n".join(files) + "\n")
    blobs = {f: (CORPUS_DIR / f).read_bytes() for f in files}
    lines = sum(b.count(b"\n") for b in blobs.values())
    torchy = sum(b"torch" in b for b in blobs.values())  # TorchFix's own pre-screen
    parsed = run([PY, "-c", PRESCREEN, all_list], cwd=CORPUS_DIR, capture_output=True, text=True).stdout.split()
    parsed_list.write_text("\n".join(parsed) + "\n")
    log(f"{', '.join(names)}: {len(files)} files, {lines} lines, {len(parsed)} pass devlint's pre-screen, "
        f"{torchy} mention 'torch'")

    plain = venv("venv-flake8", [f"flake8=={md.version('flake8')}"])
    flake8_pin = f"flake8=={md.version('flake8')}"
    tf = None if args.skip_torchfix else venv(
        "venv-torchfix", [TORCHFIX, flake8_pin],
        ["--no-deps", TORCHFIX, flake8_pin, "pyflakes", "pycodestyle", "mccabe", "libcst>=1.5,<1.6", "PyYAML"])

    dl_help = help_text([BIN / "devlint", "check", "--help"])
    dl = [BIN / "devlint", "check", *(f for f in ("--no-cache", "--isolated") if f in dl_help)]  # no cache, no config
    has_j = "-j" in dl_help.replace("[", " ").split()  # `devlint check -j N` (issue 7, item 2)
    everything, n_all = (len(files), lines), len(files)
    rows = []
    if has_j:
        rows.append(measure("devlint check -j 1", [*dl, "-j", "1", *files], runs, (*everything, len(parsed))))
    rows.append(measure("devlint check" + (" (default -j)" if has_j else ""), [*dl, *files], runs,
                        (*everything, len(parsed))))
    if tf:
        rows.append(measure("torchfix (default -j)", [tf / "torchfix", *files], args.torchfix_runs or runs,
                            (*everything, torchy)))
    rows.append(measure("flake8 --select=E9, devlint installed", [BIN / "flake8", "--isolated", "--select=E9", *files],
                        runs, (*everything, n_all)))
    rows.append(measure("flake8 --select=E9 alone", [plain / "flake8", "--isolated", "--select=E9", *files],
                        runs, (*everything, n_all)))
    parsed_lines = sum(blobs[f].count(b"\n") for f in parsed)
    rows.append(measure("bare libcst.parse_module", [PY, "-c", BARE, parsed_list], runs,
                        (len(parsed), parsed_lines, len(parsed))))

    by = {r[0]: r for r in rows}
    dev_rows = [r for r in rows if r[0].startswith("devlint")]
    ratios = []
    for r in dev_rows:
        if tf:
            ratios.append((f"{r[0]} / torchfix", r, by["torchfix (default -j)"], "<= 0.2"))
    ratios.append(("flake8+devlint / flake8 alone",
                   by["flake8 --select=E9, devlint installed"], by["flake8 --select=E9 alone"], "<= 1.5"))
    for r in dev_rows:
        ratios.append((f"{r[0]} / bare libcst parse", r, by["bare libcst.parse_module"], "<= 2"))

    def ok(value, target):
        return "yes" if value <= float(target.split()[-1]) else "**no**"

    table = ["| tool | files | lines | files parsed | median wall s | peak RSS MB | median CPU s |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    table += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | {r[5]:.0f} | {r[6]:.2f} |" for r in rows]
    table += ["", "| ratio | wall | target | met | (CPU) |", "|---|--:|--:|:-:|--:|"]
    table += [f"| {name} | {a[4] / b[4]:.2f} | {t} | {ok(a[4] / b[4], t)} | {a[6] / b[6]:.2f} |"
              for name, a, b, t in ratios]
    table += [f"| {r[0]} peak RSS MB | {r[5]:.0f} | <= 300 | {ok(r[5], '300')} | |" for r in dev_rows]
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
        f"{len(parsed)} pass devlint's pre-screen, {torchy} mention 'torch' (TorchFix's pre-screen)",
        "", "Regenerate with the command above; column meanings are in benchmarks/README.md.", "", "",
    ]
    args.output.write_text("\n".join(head) + text + "\n")
    log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
