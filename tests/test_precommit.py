"""The ``devlint`` pre-commit hook, run by pre-commit itself (``pre-commit try-repo``).

pre-commit installs the hook's repository with pip into an environment of its own, so this
test needs pip to find devlint's dependencies (libcst, flake8, setuptools): from an index, a
local mirror (pip.conf) or ``PIP_FIND_LINKS``. Where none is reachable it is skipped, saying so;
pip is told not to retry, so an offline machine skips quickly instead of hanging.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit (pip install -e '.[test]')")

BAD = "import torch\nx = torch.ones(1).cuda()\n"
#: pip's words when it cannot reach an index or find a distribution.
OFFLINE = (
    "No matching distribution found", "Could not find a version", "NewConnectionError",
    "Network is unreachable", "Temporary failure in name resolution", "Failed to establish a new connection",
    "ProxyError", "Max retries exceeded",
)


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=devlint-test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false", *args],
        cwd=cwd, check=True, capture_output=True, timeout=120,
    )


def snapshot(dest: Path) -> Path:
    """This working tree (tracked and untracked, not ignored files) as a one-commit repository,
    so that the hook runs the code under test, committed or not."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    git("init", "-q", cwd=dest)
    git("add", ".", cwd=dest)
    git("commit", "-q", "-m", "snapshot", cwd=dest)
    return dest


def test_manifest_declares_the_hook():
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "devlint")
    assert hook["entry"].split()[:2] == ["devlint", "check"] and "--force-exclude" in hook["entry"].split()
    assert hook["language"] == "python"
    assert hook["types_or"] == ["python", "pyi", "jupyter"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_hook_runs_through_pre_commit(tmp_path):
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (pip install -e '.[test]')")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the hook repository is snapshotted with git")
    hook_repo = snapshot(tmp_path / "hook-repo")
    project = tmp_path / "project"
    project.mkdir()
    files = {
        "pyproject.toml": "[tool.devlint]\nextend-exclude = [\"legacy\"]\n",
        "bad.py": BAD,
        "good.py": "import torch\nx = torch.ones(1)\n",
        "legacy/old.py": BAD,
        "notes.txt": "x.cuda()\n",
    }
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    git("init", "-q", cwd=project)
    git("add", ".", cwd=project)
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "cache"), PIP_RETRIES="0", PIP_DEFAULT_TIMEOUT="15",
               PRE_COMMIT_COLOR="never", SKIP="")
    env.pop("VIRTUAL_ENV", None)
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), "devlint", "--verbose", "--files", *files],
        cwd=project, capture_output=True, text=True, env=env, timeout=900,
    )
    output = result.stdout + result.stderr
    log = (tmp_path / "cache" / "pre-commit.log")
    details = output + (log.read_text() if log.exists() else "")
    if "DEV102" not in output and any(marker in details for marker in OFFLINE):
        pytest.skip("pip could not install the hook's dependencies (no index, mirror or PIP_FIND_LINKS reachable)")
    assert result.returncode == 1, output
    assert "bad.py:2:19: DEV102" in output
    assert "old.py" not in output  # --force-exclude applies [tool.devlint] exclude to named files
    assert "notes.txt" not in output


def readme_local_hooks() -> list[str]:
    """The README's ``.pre-commit-config.yaml`` snippets that use ``repo: local``."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", readme, re.S)
    return [b for b in blocks if "repo: local" in b]


def test_readme_has_no_unreal_pre_commit_rev():
    """Every pre-commit snippet of the README runs as written: no tag that does not exist."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "rev: v0.1.0" not in readme and "additional_dependencies: [devlint]" not in readme
    assert len(readme_local_hooks()) == 2


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("index", [0, 1])
def test_readme_pre_commit_snippet_runs_as_written(tmp_path, index):
    """The README's snippet, pasted as it is, runs the installed devlint (or its flake8
    plugin) on the staged files: offline, pre-commit installs nothing for ``language: system``."""
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (pip install -e '.[test]')")
    project = tmp_path / "project"
    project.mkdir()
    files = {"bad.py": BAD, "good.py": "import torch\nx = torch.ones(1)\n"}
    for name, text in files.items():
        (project / name).write_text(text)
    (project / ".pre-commit-config.yaml").write_text(readme_local_hooks()[index])
    git("init", "-q", cwd=project)
    git("add", ".", cwd=project)
    bin_dir = str(Path(sys.executable).parent)  # where pip put devlint and flake8
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "cache"), PRE_COMMIT_COLOR="never", SKIP="",
               PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    result = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose"],
                            cwd=project, capture_output=True, text=True, env=env, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "bad.py:2:19: DEV102" in output and "good.py" not in output.replace("bad.py", "")
