"""A user's path through devlint on a small training repository (fixtures/sample_repo: train.py,
a src/ package, a notebook, a folder with its own pyproject.toml), every command run as a user
runs it, on a copy, with the outputs checked."""

from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

SAMPLE = ROOT / "fixtures" / "sample_repo"


def devlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DEVLINT_OUTPUT_FORMAT", None)
    return subprocess.run([sys.executable, "-m", "devlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)


@pytest.fixture
def repo(tmp_path) -> Path:
    dest = tmp_path / "sample_repo"
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".devlint_cache", "__pycache__"))
    return dest


def test_check_honours_nested_configs_and_notebooks(repo):
    result = devlint("check", "--output-format", "concise", "--no-cache", ".", cwd=repo)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert "explore.ipynb:cell 3:2:10: DEV206 [*] cuda.amp.GradScaler is deprecated: use " \
           'torch.amp.GradScaler("cuda")' in lines
    assert any(line.startswith("train.py:12:11: DEV102") for line in lines)
    exported = [line for line in lines if line.startswith("tools/export.py")]
    assert exported and all("DEV102" not in line for line in exported)  # tools/pyproject.toml ignores it
    data = json.loads(devlint("check", "--output-format", "json", "--no-cache", ".", cwd=repo).stdout)
    assert len(data) == len([line for line in lines if ": DEV" in line])
    sarif = json.loads(devlint("check", "--output-format", "sarif", "--no-cache", ".", cwd=repo).stdout)
    assert all("helpUri" not in rule for rule in sarif["runs"][0]["tool"]["driver"]["rules"])


def test_runtime_finds_the_src_package(repo):
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    module = devlint("runtime", "toyproj.steps:make_step", "--mode", "bfloat16", "--format", "markdown",
                     "--html", "report.html", cwd=repo)
    assert module.returncode == 0, module.stderr
    assert "**:white_check_mark: ok**" in module.stdout
    # python -m puts the working directory on sys.path itself; the console script does not
    assert re.search(r"^- sys\.path: added (\., )?src to import the target$", module.stdout, re.M)
    assert "<svg" in (repo / "report.html").read_text(encoding="utf-8")
    script = devlint("runtime", "train.py:make_step", "--mode", "float32", cwd=repo)
    assert script.returncode == 0, script.stderr
    assert re.search(r"sys\.path: added (\., )?src to import the target", script.stdout)


def test_fix_converges_to_no_fixable_finding(repo):
    fixed = devlint("check", "--no-cache", "--fix", "--unsafe-fixes", "--output-format", "concise", ".", cwd=repo)
    assert fixed.returncode == 1, fixed.stderr
    left = json.loads(devlint("check", "--no-cache", "--output-format", "json", ".", cwd=repo).stdout)
    assert left and all(item["fix"] is None for item in left)  # nothing more to fix, safe or not
    assert {item["code"] for item in left} == {"DEV102"}  # .cuda() with no device in scope
    train = (repo / "train.py").read_text()
    assert 'scaler = GradScaler("cuda" if torch.cuda.is_available() else "cpu")' in train
    notebook = json.loads((repo / "explore.ipynb").read_text())
    assert notebook["cells"][2]["source"][1] == \
        'scaler = torch.amp.GradScaler("cuda" if torch.cuda.is_available() else "cpu")\n'


def test_add_noqa_handles_the_notebook(repo):
    added = devlint("check", "--no-cache", "--add-noqa", ".", cwd=repo)
    assert added.returncode == 0, added.stderr
    assert devlint("check", "--no-cache", ".", cwd=repo).returncode == 0  # every finding silenced
    notebook = json.loads((repo / "explore.ipynb").read_text())
    assert notebook["cells"][2]["source"][1:] == ["scaler = torch.cuda.amp.GradScaler()  # noqa: DEV206\n",
                                                  "x = torch.randn(2, 8).cuda()  # noqa: DEV102"]
    assert notebook["cells"][0]["source"] == ["# Try the classifier"]  # markdown untouched
