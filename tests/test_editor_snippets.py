"""The README's Neovim snippets, run in the Neovim that is installed (Debian 12's is 0.7).

Each ``init.lua`` block is used as it stands; the test opens a Python file with a finding and
waits until the diagnostic arrives from ``devlint server``. A snippet for a newer Neovim than
the one installed is skipped, saying so. Helix and VS Code are not installed here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

NVIM = shutil.which("nvim")
pytest.importorskip("pygls", reason="devlint server needs pygls (pip install -e '.[test]')")


def snippets() -> dict[str, str]:
    """``{"0.7": lua, "0.8": lua}``: the README's Neovim blocks, keyed by the version named
    in the line before each."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = {}
    for match in re.finditer(r"```lua\n(.*?)```", readme, re.S):
        before = readme[:match.start()].rsplit("\n\n", 2)[-2]  # the paragraph above the block
        version = re.match(r"Neovim (?:≥ )?(0\.\d+)", before)
        if version:
            found[version.group(1)] = match.group(1)
    return found


def nvim_version() -> tuple[int, int]:
    out = subprocess.run([NVIM, "--version"], capture_output=True, text=True, timeout=60).stdout
    major, minor = re.search(r"NVIM v(\d+)\.(\d+)", out).groups()
    return int(major), int(minor)


def test_readme_has_both_neovim_snippets():
    assert set(snippets()) == {"0.7", "0.8"}


@pytest.mark.skipif(NVIM is None, reason="Neovim is not installed (apt-get install neovim)")
@pytest.mark.parametrize("version", ["0.7", "0.8"])
def test_neovim_snippet_shows_the_diagnostic(tmp_path, version):
    needed = tuple(int(x) for x in version.split("."))
    if nvim_version() < needed:
        pytest.skip(f"the snippet is for Neovim {version}+, {'.'.join(map(str, nvim_version()))} is installed")
    (tmp_path / "init.lua").write_text(snippets()[version])
    (tmp_path / "pyproject.toml").write_text("[tool.devlint]\n")
    (tmp_path / "train.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    out = tmp_path / "out.txt"
    probe = ("lua vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 100); "
             "local d = vim.diagnostic.get(0); local lines = {}; "
             "for _, x in ipairs(d) do table.insert(lines, (x.code or '') .. ' ' .. x.lnum .. ' ' .. x.message) end; "
             f"vim.fn.writefile(lines, '{out}')")
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""), HOME=str(tmp_path),
               XDG_STATE_HOME=str(tmp_path / "state"), XDG_DATA_HOME=str(tmp_path / "data"))
    subprocess.run([NVIM, "--headless", "-u", str(tmp_path / "init.lua"), "-i", "NONE", "train.py",
                    "-c", probe, "-c", "qa!"], cwd=tmp_path, env=env, capture_output=True, text=True,
                   timeout=120)
    assert out.exists(), "Neovim wrote nothing"
    assert out.read_text().splitlines() == ["DEV102 1 .cuda() pins this to CUDA: use .to(device)"]
