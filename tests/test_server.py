"""The language server over real stdio: diagnostics on open/change, a noqa code action."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("pygls")

from conftest import ROOT  # noqa: E402

SOURCE = 'import torch\nx = torch.ones(1).cuda()\ny = torch.ones(1, device="cuda")  # noqa: DEV101\n'


class Client:
    """Just enough JSON-RPC framing to drive a language server over pipes."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "devlint", "server"], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.next_id = 0

    def send(self, method: str, params: dict, request: bool = False) -> int | None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return message.get("id")

    def receive(self) -> dict:
        length = 0
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError(self.proc.stderr.read().decode())
            if line in (b"\r\n", b"\n"):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.proc.stdout.read(length))

    def wait_for(self, predicate) -> dict:
        for _ in range(50):
            message = self.receive()
            if predicate(message):
                return message
        raise AssertionError("no such message")

    def close(self) -> None:
        self.send("shutdown", {}, request=True)
        self.send("exit", {})
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def client(tmp_path):
    c = Client()
    c.send("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}, request=True)
    c.wait_for(lambda m: m.get("id") == 1)
    c.send("initialized", {})
    yield c
    c.close()


def test_diagnostics_on_open_and_change_honour_noqa(client, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": SOURCE}})
    published = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")
    diagnostics = published["params"]["diagnostics"]
    assert [(d["code"], d["range"]["start"]["line"], d["source"]) for d in diagnostics] == [("DEV102", 1, "devlint")]
    assert diagnostics[0]["message"] == ".cuda() pins this to CUDA: use .to(device)"

    client.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                           "contentChanges": [{"text": "import torch\nx = torch.ones(1)\n"}]})
    cleared = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")
    assert cleared["params"]["diagnostics"] == []


def test_code_action_adds_noqa(client, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": SOURCE}})
    diagnostic = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")["params"]["diagnostics"][0]
    rid = client.send("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": diagnostic["range"],
                                                  "context": {"diagnostics": [diagnostic]}}, request=True)
    actions = client.wait_for(lambda m: m.get("id") == rid)["result"]
    assert actions[0]["title"] == "Disable DEV102 for this line"
    assert actions[0]["edit"]["changes"][uri][0]["newText"] == "x = torch.ones(1).cuda()  # noqa: DEV102"
