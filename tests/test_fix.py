"""Autofixes: the edits, ``--fix`` in place, ``--diff`` without writing."""

from __future__ import annotations

from devlint.engine import lint
from devlint.finding import Edit, Finding, Fix
from devlint.fix import apply, fix_source

from conftest import devlint

OLD = '''import torch
scaler = torch.cuda.amp.GradScaler(enabled=torch.cuda.is_available())
with torch.cuda.amp.autocast(
    dtype=torch.float16,
):
    pass
positional = torch.cuda.amp.autocast(True)


class Square(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd
    def forward(ctx, x):
        return x * x
'''

NEW = '''import torch
scaler = torch.amp.GradScaler("cuda", enabled=torch.cuda.is_available())
with torch.amp.autocast(
    "cuda", dtype=torch.float16,
):
    pass
positional = torch.amp.autocast("cuda", enabled=True)


class Square(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, x):
        return x * x
'''


def test_dev206_fix_rewrites_to_torch_amp():
    fixed, count = fix_source(OLD.encode(), "a.py", ["DEV"], [])
    assert count == 4 and fixed.decode() == NEW
    assert not [f for f in lint(fixed.decode(), "a.py") if f.code == "DEV206"]
    assert fix_source(fixed, "a.py", ["DEV"], []) == (fixed, 0)  # nothing left to fix


def test_positional_arguments_become_keywords():
    finding = next(f for f in lint(OLD, "a.py") if f.line == 7)
    assert finding.code == "DEV206" and finding.fix.edits[0].text == 'torch.amp.autocast("cuda", enabled=True)'


def test_unsafe_and_overlapping_edits():
    text = "abcdef = 1\n"
    safe = Finding("a.py", 1, 0, "DEV1", "m", fix=Fix("x", (Edit(1, 0, 1, 3, "XYZ"),)))
    overlapping = Finding("a.py", 1, 2, "DEV2", "m", fix=Fix("y", (Edit(1, 2, 1, 4, "__"),)))
    unsafe = Finding("a.py", 1, 4, "DEV3", "m", fix=Fix("z", (Edit(1, 4, 1, 6, "gh"),), safe=False))
    assert apply(text, [safe, overlapping, unsafe]) == ("XYZdef = 1\n", 1)
    assert apply(text, [safe, overlapping, unsafe], unsafe=True) == ("XYZdgh = 1\n", 2)


def test_cli_fix_and_diff(tmp_tree):
    root = tmp_tree({"a.py": OLD})
    diff = devlint("check", "--diff", "--no-cache", str(root / "a.py"))
    assert diff.returncode == 1 and '+scaler = torch.amp.GradScaler("cuda", enabled' in diff.stdout
    assert (root / "a.py").read_text() == OLD
    fixed = devlint("check", "--fix", "--no-cache", str(root / "a.py"))
    assert (root / "a.py").read_text() == NEW
    assert "Fixed 4 findings." in fixed.stdout and fixed.returncode == 1  # DEV101 on "cuda" is left
