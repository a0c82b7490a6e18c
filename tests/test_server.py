"""The language server driven over real stdio (a subprocess), as an editor drives it.

Waits are generous (a slow shared machine) and nothing asserts a duration: speed is measured in
``benchmarks/bench_server.py``."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from conftest import ROOT  # noqa: E402

WAIT = 90.0  # seconds: a lint on two busy cores can be slow, a hang is still caught
SOURCE = 'import torch\nx = torch.ones(1).cuda()\ny = torch.ones(1, device="cuda")  # noqa: DEV101\n'
FIXABLE = (
    "import torch\n"
    "scaler = torch.cuda.amp.GradScaler()\n"
    "with torch.cuda.amp.autocast():\n"
    "    x = torch.ones(1).cuda()  # noqa: E501 long on purpose\n"
)


class Client:
    """Just enough of an LSP client: JSON-RPC framing over the server's pipes, a reader thread
    that queues every message, and edits applied with UTF-16 positions."""

    def __init__(self, cwd=ROOT) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "devlint", "server"], cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.next_id = 0
        self.inbox: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.proc.stdout
        while True:
            length = 0
            while True:
                line = stream.readline()
                if not line:
                    self.inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            self.inbox.put(json.loads(stream.read(length)))

    @staticmethod
    def frame(message: dict) -> bytes:
        body = json.dumps(message).encode()
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    def send(self, method: str, params, request: bool = False) -> int | None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        self.write(self.frame(message))
        return message.get("id")

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def wait_for(self, predicate, timeout: float = WAIT) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no such message; seen: " + json.dumps(self.seen[-5:])[:2000])
            try:
                message = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                raise EOFError(self.proc.stderr.read().decode())
            self.seen.append(message)
            if predicate(message):
                return message

    def drain(self, seconds: float) -> list[dict]:
        """Every message that arrives within ``seconds``."""
        got, deadline = [], time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = self.inbox.get(timeout=left)
            except queue.Empty:
                break
            if message is None:
                break
            self.seen.append(message)
            got.append(message)
        return got

    def request(self, method: str, params) -> dict:
        rid = self.send(method, params, request=True)
        return self.wait_for(lambda m: m.get("id") == rid and "method" not in m)

    def diagnostics(self, uri: str, version: int | None = None) -> list[dict]:
        def wanted(m):
            return (m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
                    and (version is None or m["params"].get("version") == version))
        return self.wait_for(wanted)["params"]["diagnostics"]

    def open(self, uri: str, text: str, version: int = 1) -> list[dict]:
        self.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}})
        return self.diagnostics(uri, version)

    def change(self, uri: str, text: str, version: int) -> list[dict]:
        self.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})
        return self.diagnostics(uri, version)

    def close(self) -> None:
        try:
            self.send("shutdown", None, request=True)
            self.send("exit", None)
            self.proc.wait(timeout=20)
        except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
            self.proc.kill()
            self.proc.wait()


def offset(text: str, position: dict) -> int:
    """Code-point offset in ``text`` of an LSP position counted in UTF-16 code units."""
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[: position["line"]])
    line = lines[position["line"]] if position["line"] < len(lines) else ""
    units = 0
    for index, ch in enumerate(line):
        if units >= position["character"]:
            return start + index
        units += 2 if ord(ch) > 0xFFFF else 1
    return start + len(line)


def apply_edits(text: str, edits: list[dict]) -> str:
    spans = sorted(((offset(text, e["range"]["start"]), offset(text, e["range"]["end"]), e["newText"]) for e in edits), reverse=True)
    for begin, end, new in spans:
        text = text[:begin] + new + text[end:]
    return text


@pytest.fixture
def client(tmp_path):
    c = Client()
    c.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})  # no debounce
    c.send("initialized", {})
    yield c
    c.close()


def codes(diagnostics: list[dict]) -> list[tuple[str, int]]:
    return sorted((d["code"], d["range"]["start"]["line"]) for d in diagnostics)


def test_diagnostics_on_open_and_change_honour_noqa(client, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    diagnostics = client.open(uri, SOURCE)
    assert [(d["code"], d["range"]["start"]["line"], d["source"]) for d in diagnostics] == [("DEV102", 1, "devlint")]
    assert diagnostics[0]["message"] == ".cuda() pins this to CUDA: use .to(device)"
    href = diagnostics[0]["codeDescription"]["href"]  # the checkout's docs/rules.md
    page, _, anchor = href.partition("#")
    assert page.startswith("file://") and anchor == "dev102"
    from urllib.parse import unquote, urlparse
    text = Path(unquote(urlparse(page).path)).read_text(encoding="utf-8")
    assert '<a id="dev102"></a>' in text
    assert client.change(uri, "import torch\nx = torch.ones(1)\n", 2) == []


def test_a_burst_of_edits_publishes_the_last_text_only(tmp_path):
    client = Client()
    try:
        # a long debounce: all 20 edits (written at once) arrive before the first lint starts
        client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {},
                                      "initializationOptions": {"debounce": 1.0}})
        client.send("initialized", {})
        uri = (tmp_path / "train.py").as_uri()
        client.open(uri, "import torch\n")
        texts = ["import torch\n" + "\n" * k + "x = torch.ones(1).cuda()\n" for k in range(20)]
        burst = b"".join(Client.frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": 2 + k}, "contentChanges": [{"text": text}]}})
            for k, text in enumerate(texts))
        client.write(burst)
        final = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        assert final["params"]["version"] == 21
        assert codes(final["params"]["diagnostics"]) == [("DEV102", 20)]
        later = [m for m in client.drain(3.0) if m.get("method") == "textDocument/publishDiagnostics"]
        assert later == []
    finally:
        client.close()


def test_edits_while_a_lint_runs_never_publish_stale_text_after_the_last(client, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    body = "".join(f"def f{k}(x):\n    return x + {k}\n\n" for k in range(300))
    client.open(uri, "import torch\n" + body)
    for k in range(20):
        text = "import torch\n" + body + "\n" * k + "y = torch.ones(1).cuda()\n"
        client.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2 + k}, "contentChanges": [{"text": text}]})
        time.sleep(0.02)
    published = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["version"] == 21)
    assert codes(published["params"]["diagnostics"]) == [("DEV102", 1 + 900 + 19)]
    later = [m for m in client.drain(3.0) if m.get("method") == "textDocument/publishDiagnostics"]
    assert later == []
    versions = [m["params"]["version"] for m in client.seen if m.get("method") == "textDocument/publishDiagnostics"]
    assert versions == sorted(versions)  # never an older text after a newer one


def test_a_message_split_across_writes_is_read_whole(client, tmp_path):
    """The server reads the pipe as bytes arrive: a header and body split anywhere (and two
    messages in one write) are framed as the client meant them."""
    uri = (tmp_path / "train.py").as_uri()
    client.open(uri, "import torch\n")
    frames = b"".join(Client.frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": v}, "contentChanges": [{"text": f"import torch\nx{v} = torch.ones(1).cuda()\n"}]}})
        for v in (2, 3))
    for cut in (7, 20, len(frames) // 2 + 3):
        client.write(frames[:cut])
        time.sleep(0.05)
        frames = frames[cut:]
    client.write(frames)
    assert codes(client.diagnostics(uri, 3)) == [("DEV102", 1)]


def test_requests_are_answered_while_a_lint_runs(client, tmp_path):
    small = (tmp_path / "small.py").as_uri()
    client.open(small, SOURCE)
    big = (tmp_path / "big.py").as_uri()
    text = "import torch\n" + "".join(f"def f{k}(x):\n    return x.to(torch.device('cpu')) + {k}\n\n" for k in range(4000))
    client.send("textDocument/didOpen", {"textDocument": {"uri": big, "languageId": "python", "version": 1, "text": text}})
    time.sleep(0.5)  # the big lint (seconds) has started
    rid = client.send("textDocument/hover", {"textDocument": {"uri": small}, "position": {"line": 1, "character": 18}}, request=True)
    first = client.wait_for(lambda m: m.get("id") == rid or (m.get("method") == "textDocument/publishDiagnostics"
                                                             and m["params"]["uri"] == big))
    assert first.get("id") == rid and "(DEV102)" in first["result"]["contents"]["value"]
    client.diagnostics(big)


def test_a_syntax_error_keeps_earlier_diagnostics_and_adds_dev000(client, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    assert codes(client.open(uri, SOURCE)) == [("DEV102", 1)]
    broken = SOURCE + "def f(\n"
    diagnostics = client.change(uri, broken, 2)
    assert codes(diagnostics) == [("DEV000", 3), ("DEV102", 1)]
    error = next(d for d in diagnostics if d["code"] == "DEV000")
    assert error["severity"] == 1 and "could not parse" in error["message"]
    # a line edited while broken loses its old finding; lines below keep theirs, moved
    edited = "import torch\nz = 1\nx = torch.ones(1).cuda()\ndef f(\n"
    assert codes(client.change(uri, edited, 3)) == [("DEV000", 3)]
    assert codes(client.change(uri, edited.replace("def f(\n", "def f(): pass\n"), 4)) == [("DEV102", 2)]


def test_every_code_action_applies_and_removes_its_finding(client, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    diagnostics = client.open(uri, FIXABLE)
    assert codes(diagnostics) == [("DEV102", 3), ("DEV206", 1), ("DEV206", 2)]
    version, tried = 1, 0
    for target in diagnostics:
        actions = client.request("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": target["range"], "context": {"diagnostics": [target]}})["result"]
        mine = [a for a in actions if a["kind"] == "quickfix" and target in a.get("diagnostics", [])]
        titles = [a["title"] for a in mine]
        assert f"Disable {target['code']} for this line" in titles
        if target["code"] == "DEV206":
            assert any(t.startswith("DEV206: use torch.amp.") for t in titles)
        for action in mine:
            fixed = apply_edits(FIXABLE, action["edit"]["changes"][uri])
            version += 1
            after = client.change(uri, fixed, version)
            assert (target["code"], target["range"]["start"]["line"]) not in codes(after), (action["title"], fixed)
            others = [d for d in diagnostics if d is not target]
            assert all((d["code"], d["range"]["start"]["line"]) in codes(after) for d in others), action["title"]
            compile(fixed, "train.py", "exec")
            version += 1
            client.change(uri, FIXABLE, version)
            tried += 1
    assert tried == 5
    cuda = next(d for d in diagnostics if d["code"] == "DEV102")
    noqa_line = next(a for a in client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": cuda["range"], "context": {"diagnostics": [cuda]}})["result"]
        if a["title"].startswith("Disable"))["edit"]["changes"][uri][0]["newText"]
    assert noqa_line == "    x = torch.ones(1).cuda()  # noqa: E501,DEV102 long on purpose"

    whole = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": [], "only": ["source.fixAll"]}})["result"]
    assert [a["kind"] for a in whole] == ["source.fixAll.devlint"]
    fixed = apply_edits(FIXABLE, whole[0]["edit"]["changes"][uri])
    assert 'torch.amp.GradScaler("cuda")' in fixed and 'torch.amp.autocast("cuda")' in fixed
    version += 1
    assert [c for c in codes(client.change(uri, fixed, version)) if c[0] != "DEV101"] == [("DEV102", 3)]


def test_hover_on_a_flagged_range_shows_the_rule_docs(client, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    diagnostic = client.open(uri, SOURCE)[0]
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": diagnostic["range"]["start"]})["result"]
    assert hover["contents"]["kind"] == "markdown"
    assert "(DEV102)" in hover["contents"]["value"] and "## What it does" in hover["contents"]["value"]
    nothing = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
    assert nothing["result"] is None


def test_positions_are_utf16_code_units(client, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    text = 'import torch\ns = "\U0001F600é"; x = torch.ones(1).cuda()\n'
    diagnostic = client.open(uri, text)[0]
    line = text.split("\n")[1]
    column = line.index("cuda")
    assert diagnostic["range"]["start"]["character"] == column + 1  # the emoji is two UTF-16 units


def test_a_notebook_gets_diagnostics_per_cell(client, tmp_path):
    notebook = (tmp_path / "train.ipynb").as_uri()
    cells = [("c1", 2, "import torch\n"), ("m1", 1, "# not python"), ("c2", 2, "x = torch.ones(1).cuda()\n"),
             ("c3", 2, "%matplotlib inline\ny = x.to('cpu')\n")]
    cell_uri = {name: f"vscode-notebook-cell:{tmp_path.as_posix()}/train.ipynb#{name}" for name, _, _ in cells}
    client.send("notebookDocument/didOpen", {
        "notebookDocument": {"uri": notebook, "notebookType": "jupyter-notebook", "version": 1,
                             "cells": [{"kind": kind, "document": cell_uri[name]} for name, kind, _ in cells]},
        "cellTextDocuments": [{"uri": cell_uri[name], "languageId": "python" if kind == 2 else "markdown",
                               "version": 1, "text": text} for name, kind, text in cells],
    })
    got = {}
    while len(got) < 3:
        message = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        got[message["params"]["uri"]] = message["params"]["diagnostics"]
    assert set(got) == {cell_uri["c1"], cell_uri["c2"], cell_uri["c3"]}
    assert got[cell_uri["c1"]] == [] and got[cell_uri["c3"]] == []
    assert codes(got[cell_uri["c2"]]) == [("DEV102", 0)]
    # editing one cell re-lints the notebook; the fixed cell is cleared
    client.send("notebookDocument/didChange", {
        "notebookDocument": {"uri": notebook, "version": 2},
        "change": {"cells": {"textContent": [{"document": {"uri": cell_uri["c2"], "version": 2}, "changes": [
            {"range": {"start": {"line": 0, "character": 17}, "end": {"line": 0, "character": 24}}, "text": ""}]}]}},
    })
    assert client.diagnostics(cell_uri["c2"]) == []


def test_bad_input_never_pops_up_an_error(client, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    # didChange for a document never opened, then a lone surrogate in a document
    client.send("textDocument/didChange", {"textDocument": {"uri": (tmp_path / "ghost.py").as_uri(), "version": 2},
                                           "contentChanges": [{"text": "x = 1\n"}]})
    text = 'import torch\ns = "\ud800"; x = torch.ones(1).cuda()\n'
    diagnostic = client.open(uri, text)[0]
    assert diagnostic["code"] == "DEV102"
    assert diagnostic["range"]["start"]["character"] == text.split("\n")[1].index("cuda")
    # invalid params: an error response, and the server keeps serving
    reply = client.request("textDocument/hover", {"textDocument": 5, "position": "here"})
    assert reply["error"]["code"] == -32602
    assert client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})["result"] is None
    assert not [m for m in client.seen if m.get("method") == "window/showMessage"]


def test_settings_come_from_the_files_own_pyproject_and_reload(client, tmp_path):
    project = tmp_path / "proj"
    (project / "legacy").mkdir(parents=True)
    config = project / "pyproject.toml"
    config.write_text('[tool.devlint]\nignore = ["DEV102"]\nextend-exclude = ["legacy"]\n')
    uri = (project / "train.py").as_uri()
    assert client.open(uri, SOURCE) == []
    assert client.open((project / "legacy" / "old.py").as_uri(), SOURCE) == []
    assert codes(client.open((tmp_path / "outside.py").as_uri(), SOURCE)) == [("DEV102", 1)]
    config.write_text('[tool.devlint]\nper-file-ignores = { "tests/*" = ["DEV102"] }\n')
    client.send("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 2}]})
    assert codes(client.diagnostics(uri)) == [("DEV102", 1)]
    config.write_text('[tool.devlint\n')  # broken: the defaults, a note in the log, no pop-up
    client.send("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 2}]})
    assert codes(client.diagnostics(uri)) == [("DEV102", 1)]
    client.wait_for(lambda m: m.get("method") == "window/logMessage" and "pyproject.toml" in m["params"]["message"])
    assert not [m for m in client.seen if m.get("method") == "window/showMessage"]


def test_two_findings_on_a_line_get_one_noqa_action(client, tmp_path):
    """Issue 23: each code action once when two findings share a line."""
    uri = (tmp_path / "two.py").as_uri()
    diagnostics = client.open(uri, "import torch\na, b = torch.ones(1).cuda(), torch.ones(2).cuda()\n")
    assert [d["code"] for d in diagnostics] == ["DEV102", "DEV102"]
    line = {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}
    actions = client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": line,
                                                         "context": {"diagnostics": diagnostics}})["result"]
    titles = [a["title"] for a in actions]
    assert len(titles) == len(set(titles)), titles
    disable = [a for a in actions if a["title"] == "Disable DEV102 for this line"]
    assert len(disable) == 1 and len(disable[0]["diagnostics"]) == 2


def test_client_mistakes_are_warnings_not_internal_errors(client, tmp_path):
    # an unknown method is answered "method not found"; a body that is not JSON is dropped
    reply = client.request("devlint/noSuchMethod", {})
    assert reply["error"]["code"] == -32601
    client.write(b"Content-Length: 9\r\n\r\n{not json")
    uri = (tmp_path / "a.py").as_uri()
    assert client.open(uri, "import torch\nx = torch.ones(1).cuda()\n")[0]["code"] == "DEV102"  # still serving
    logged = [m["params"] for m in client.seen if m.get("method") == "window/logMessage"]
    assert not [p for p in logged if p["type"] == 1], logged  # 1: Error
    assert len([p for p in logged if p["type"] == 2 and "client error" in p["message"]]) == 2, logged
    client.close()
    assert "Traceback" not in client.proc.stderr.read().decode()
