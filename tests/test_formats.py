"""``devlint check --format``: text, json, sarif, github, gitlab; ``--output-file``,
``--exit-zero``, ``--statistics``. Each runs on one file with two findings and a ``# noqa``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from devlint.finding import Finding
from devlint.formats import NAMES, github, gitlab
from devlint.rules import all_rules

from conftest import devlint as run_devlint

SOURCE = """import torch
a = torch.ones(1).cuda()
b = torch.ones(1, device="cuda")  # noqa: DEV101
c = torch.load("x.pt")
"""
EXPECTED = [("DEV102", 2, 19), ("DEV104", 4, 5)]  # (code, line, 1-based column)


@pytest.fixture
def project(tmp_tree):
    """A repository (it has ``.git``) with one file: two findings and one silenced line."""
    return tmp_tree({".git/HEAD": "ref: refs/heads/main\n", "src/train.py": SOURCE})


def check(root: Path, *args: str):
    return run_devlint("check", *args, "src/train.py", cwd=root)


def test_every_format_is_listed_in_help():
    usage = re.sub(r"-\n\s+", "-", run_devlint("check", "--help").stdout)  # argparse wraps at hyphens
    for name in NAMES:
        assert name in usage


def test_text(project):
    result = check(project)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "src/train.py:2:19: DEV102 .cuda() pins this to CUDA: use .to(device)",
        "src/train.py:4:5: DEV104 torch.load without map_location fails without CUDA: pass map_location",
        "Found 2 findings in 1 of 1 file (1 fixable with `--fix --unsafe-fixes`).",
    ]


def test_json_follows_ruffs_schema(project):
    result = check(project, "--format", "json")
    assert result.returncode == 1
    items = json.loads(result.stdout)
    assert [(i["code"], i["location"]["row"], i["location"]["column"]) for i in items] == EXPECTED
    for item in items:  # ruff check --output-format json's fields and nesting
        assert set(item) == {"cell", "code", "end_location", "filename", "fix", "location", "message",
                             "noqa_row", "url"}
        assert item["filename"] == str(project / "src" / "train.py") and item["url"] is None
        assert item["noqa_row"] == item["location"]["row"] and item["cell"] is None
        fix = item["fix"]
        if fix is not None:
            assert set(fix) == {"applicability", "edits", "message"} and fix["applicability"] == "unsafe"
            assert all(set(e) == {"content", "end_location", "location"} for e in fix["edits"])
    first = items[0]
    assert first["end_location"] == {"row": first["location"]["row"], "column": len("a = torch.ones(1).cuda") + 1}


def test_json_devlint_keeps_the_earlier_schema(project):
    result = check(project, "--format", "json-devlint")
    assert result.returncode == 1
    items = json.loads(result.stdout)
    assert [(i["code"], i["line"], i["column"]) for i in items] == EXPECTED
    for item in items:
        assert set(item) == {"code", "message", "path", "line", "column", "end_line", "end_column", "fix"}
        assert item["path"] == "src/train.py"
        assert (item["fix"] or {}).get("applicability") in (None, "unsafe")  # DEV104's map_location="cpu"
        assert (item["end_line"], item["end_column"]) > (item["line"], item["column"])
    assert items[0]["end_column"] == len("a = torch.ones(1).cuda") + 1  # the `cuda` token


def test_sarif_has_the_required_fields(project):
    result = check(project, "--format", "sarif")
    assert result.returncode == 1
    log = json.loads(result.stdout)
    assert log["$schema"].endswith("sarif-2.1.0.json") and log["version"] == "2.1.0"
    assert len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "devlint" and driver["version"]
    assert "informationUri" not in driver  # no published home page: no link to a missing one
    ids = [r["id"] for r in driver["rules"]]
    assert ids == [r.code for r in all_rules()]
    for rule in driver["rules"]:
        assert rule["name"] and rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert "## Why is this bad?" in rule["help"]["text"]
    results = run["results"]
    assert len(results) == 2
    for res, (code, line, column) in zip(results, EXPECTED):
        assert res["ruleId"] == code and ids[res["ruleIndex"]] == code
        assert res["level"] == "warning" and res["message"]["text"]
        location = res["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == "src/train.py"  # repository-relative
        region = location["region"]
        assert (region["startLine"], region["startColumn"]) == (line, column)  # SARIF columns are 1-based
        assert region["endLine"] == line and region["endColumn"] > region["startColumn"]


def test_sarif_paths_are_relative_to_the_repository_from_a_subfolder(project):
    result = run_devlint("check", "--format", "sarif", "train.py", cwd=project / "src")
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in json.loads(result.stdout)["runs"][0]["results"]}
    assert uris == {"src/train.py"}


def test_github(project):
    result = check(project, "--format", "github")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0] == (
        "::warning file=src/train.py,line=2,col=19,endLine=2,endColumn=23,title=DEV102::"
        ".cuda() pins this to CUDA: use .to(device)"
    )
    assert lines[1].startswith("::warning file=src/train.py,line=4,col=5,endLine=4,endColumn=23,title=DEV104::torch.load")
    pattern = re.compile(r"^::warning file=[^,:]+,line=\d+,col=\d+,endLine=\d+,endColumn=\d+,title=DEV\d{3}::[^\r\n]+$")
    assert all(pattern.match(line) for line in lines)


def test_github_escapes_messages_and_properties(tmp_path):
    finding = Finding(str(tmp_path / "a,b:c%.py"), 3, 0, "DEV101", "100% on\r\ncuda: a, b", 3, 4)
    line = github.annotation(finding, tmp_path)
    assert line == "::warning file=a%2Cb%3Ac%25.py,line=3,col=1,endLine=3,endColumn=5,title=DEV101::100%25 on%0D%0Acuda: a, b"
    assert "\n" not in line and "\r" not in line
    assert github.escape_property("x:y,z%\n") == "x%3Ay%2Cz%25%0A"


def test_gitlab(project):
    result = check(project, "--format", "gitlab")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert [(r["check_name"], r["location"]["lines"]["begin"]) for r in report] == [(c, l) for c, l, _ in EXPECTED]
    for issue in report:
        assert set(issue) >= {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["description"].startswith(issue["check_name"])
        assert issue["location"]["path"] == "src/train.py"
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
    assert len({r["fingerprint"] for r in report}) == 2


def test_gitlab_fingerprints_survive_moved_lines_and_tell_duplicates_apart(project):
    first = {r["check_name"]: r["fingerprint"] for r in json.loads(check(project, "--format", "gitlab").stdout)}
    (project / "src/train.py").write_text("# a new comment\n\n" + SOURCE)
    moved = {r["check_name"]: r["fingerprint"] for r in json.loads(check(project, "--format", "gitlab").stdout)}
    assert moved == first
    (project / "src/train.py").write_text(SOURCE + "a = torch.ones(1).cuda()\n")
    twice = [r["fingerprint"] for r in json.loads(check(project, "--format", "gitlab").stdout) if r["check_name"] == "DEV102"]
    assert len(set(twice)) == 2 and first["DEV102"] in twice


def test_gitlab_fingerprint_ignores_the_line_number(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\ny = torch.load(f)\n")
    one = Finding(str(tmp_path / "a.py"), 2, 4, "DEV104", "m", 2, 9)
    assert len(gitlab.fingerprints([one, one], tmp_path)) == 2
    assert gitlab.fingerprints([one], tmp_path) == gitlab.fingerprints([one], tmp_path)


@pytest.mark.parametrize("fmt", NAMES)
def test_output_file_and_exit_zero(project, fmt):
    result = check(project, "--format", fmt, "--output-file", "reports/out.txt", "--exit-zero")
    assert result.returncode == 0 and result.stdout == ""
    written = (project / "reports/out.txt").read_text()
    assert "DEV102" in written and "DEV104" in written
    if fmt not in ("sarif", "full"):  # SARIF lists every rule; full shows the noqa'd line as context
        assert "DEV101" not in written


def test_statistics(project):
    result = check(project, "--statistics")
    assert result.returncode == 1
    rows = [line.split("\t") for line in result.stdout.splitlines() if "\t" in line]
    assert rows == [["1", "DEV102", "[ ] cuda-method-call"], ["1", "DEV104", "[ ] load-without-map-location"]]
    unsafe = [line.split("\t") for line in check(project, "--statistics", "--unsafe-fixes").stdout.splitlines() if "\t" in line]
    assert unsafe[1] == ["1", "DEV104", "[*] load-without-map-location"]  # its fix is unsafe
    counts = json.loads(check(project, "--statistics", "--format", "json").stdout)
    assert counts == [
        {"code": "DEV102", "name": "cuda-method-call", "count": 1, "fixable": False},
        {"code": "DEV104", "name": "load-without-map-location", "count": 1, "fixable": False},
    ]
    assert check(project, "--statistics", "--format", "sarif").returncode == 2


def test_machine_formats_of_a_clean_run_are_valid(tmp_tree):
    root = tmp_tree({"ok.py": "x = 1\n"})
    for fmt in ("json", "gitlab"):
        result = run_devlint("check", "--format", fmt, "ok.py", cwd=root)
        assert result.returncode == 0 and json.loads(result.stdout) == []
    sarif = json.loads(run_devlint("check", "--format", "sarif", "ok.py", cwd=root).stdout)
    assert sarif["runs"][0]["results"] == []
    assert run_devlint("check", "--format", "github", "ok.py", cwd=root).stdout == ""
