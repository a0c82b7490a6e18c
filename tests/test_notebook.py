"""``devlint check`` on Jupyter notebooks named on the command line."""

from __future__ import annotations

import json

import pytest

from devlint import notebook

from conftest import devlint as run_devlint


def cell(source, kind: str = "code") -> dict:
    item = {"cell_type": kind, "metadata": {}, "source": source}
    if kind == "code":
        item.update(outputs=[], execution_count=None)
    return item


def notebook_text(*cells: dict) -> str:
    return json.dumps({"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


NOTEBOOK = notebook_text(
    cell(["# Training\n"], "markdown"),
    cell(["%matplotlib inline\n", "import torch\n", "!nvidia-smi\n"]),
    cell("x = torch.ones(1).cuda()\ny = torch.ones(1).cuda()  # noqa: DEV102\n"),
    cell(["%%bash\n", "echo 'torch.load(x)'\n"]),
    cell(["%%time\n", "state = torch.load('a.pt')\n"]),
)


def test_findings_are_placed_in_their_cells(tmp_tree):
    root = tmp_tree({"train.ipynb": NOTEBOOK})
    result = run_devlint("check", "train.ipynb", cwd=root)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[:2] == [
        "train.ipynb:cell 3:1:19: DEV102 .cuda() pins this to CUDA: use .to(device)",
        "train.ipynb:cell 5:2:9: DEV104 torch.load without map_location fails without CUDA: "
        "pass map_location",
    ]
    items = json.loads(run_devlint("check", "--format", "json", "train.ipynb", cwd=root).stdout)
    assert [(i["code"], i["cell"], i["location"]["row"], i["location"]["column"]) for i in items] == \
        [("DEV102", 3, 1, 19), ("DEV104", 5, 2, 9)]  # cells counted as ruff does: markdown too
    assert items[1]["fix"]["edits"]  # DEV104's map_location="cpu"
    for item in items:  # a fix's edits count rows within the cell, as the finding does
        for e in (item["fix"] or {}).get("edits", ()):
            assert e["location"]["row"] == item["location"]["row"]


def test_gitlab_and_sarif_handle_notebooks(tmp_tree):
    root = tmp_tree({"train.ipynb": NOTEBOOK})
    report = json.loads(run_devlint("check", "--format", "gitlab", "train.ipynb", cwd=root).stdout)
    assert len({r["fingerprint"] for r in report}) == 2
    sarif = json.loads(run_devlint("check", "--format", "sarif", "train.ipynb", cwd=root).stdout)
    assert [r["properties"]["cell"] for r in sarif["runs"][0]["results"]] == [3, 5]


@pytest.mark.parametrize("content", [
    "{not json",
    "[]",
    '{"cells": 3}',
    '{"cells": [1]}',
    '{"cells": [{"cell_type": "code", "source": 5}]}',
    "\xff\xfe",
    "[" * 100_000,
])
def test_a_malformed_notebook_is_one_dev000(tmp_tree, content):
    root = tmp_tree({"bad.ipynb": content.encode("latin-1")})
    result = run_devlint("check", "bad.ipynb", cwd=root)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = [line for line in result.stdout.splitlines() if "DEV" in line]
    assert len(lines) == 1 and lines[0].startswith("bad.ipynb:1:1: DEV000 could not read notebook")


def test_a_cell_that_does_not_parse_is_reported_in_its_cell():
    data = notebook_text(cell("import torch\n"), cell("def broken(:\n")).encode()
    from devlint.runner import check_source

    findings = notebook.check(data, "n.ipynb", check_source, ["DEV"], [])
    assert [(f.code, f.cell, f.line) for f in findings] == [("DEV000", 2, 1)]


def test_magics_are_blanked_and_lines_kept():
    parsed = notebook.parse(NOTEBOOK)
    text, where = parsed.program()
    assert "%" not in text and "!" not in text and "echo" not in text
    assert len(text.splitlines()) == len(where) == 9
