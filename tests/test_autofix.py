"""The fixes rules produce (issue 12): DEV206 in every spelling, the device in scope, and the
DEV101/102/104/201/204/205 fixes, each through ``devlint check --fix``. Every fixed source
compiles, has no finding of the fixed code left, and a second ``--fix`` changes nothing."""

from __future__ import annotations

import json

import pytest

from devlint.engine import lint
from devlint.fix import fix_source
from devlint.rules import all_rules

from conftest import devlint, flake8, parse_findings

SPELLINGS = '''import torch
from torch.cuda.amp import autocast, GradScaler as GS
from torch.cuda import amp
import torch.cuda.amp as tamp

scaler = GS(2.0**10)
s2 = amp.GradScaler(enabled=True)


def f(x: GS, model):
    with autocast(True, torch.float16):
        y = model(x)
    with amp.autocast(dtype=torch.bfloat16):
        pass
    with tamp.autocast():
        pass
    return isinstance(x, GS)


class Sq(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float16)
    def forward(ctx, x):
        return x

    @staticmethod
    @torch.cuda.amp.custom_bwd
    def backward(ctx, g):
        return g


with torch.cpu.amp.autocast(dtype=torch.bfloat16):
    pass
'''

SPELLINGS_FIXED = '''import torch
from torch.amp import autocast, GradScaler as GS
from torch import amp
import torch.amp as tamp

scaler = GS("cuda", 2.0**10)
s2 = amp.GradScaler("cuda", enabled=True)


def f(x: GS, model):
    with autocast("cuda", enabled=True, dtype=torch.float16):
        y = model(x)
    with amp.autocast("cuda", dtype=torch.bfloat16):
        pass
    with tamp.autocast("cuda"):
        pass
    return isinstance(x, GS)


class Sq(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float16)
    def forward(ctx, x):
        return x

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, g):
        return g


with torch.amp.autocast("cpu", dtype=torch.bfloat16):
    pass
'''

TRAIN = '''import torch
from torch.cuda.amp import autocast, GradScaler

device = torch.device("cuda")


def train(model, loader, opt):
    scaler = GradScaler()
    model.cuda()
    for x in loader:
        with autocast():
            loss = model(x.to("cuda")).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return torch.load("ckpt.pt")


class Net(torch.nn.Module):
    def __init__(self, device):
        super().__init__()
        self.device = device

    def forward(self, x):
        return x + torch.ones(3, device="cuda")
'''

TRAIN_FIXED = '''import torch
from torch.amp import autocast, GradScaler

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train(model, loader, opt):
    scaler = GradScaler(device.type)
    model.to(device)
    for x in loader:
        with autocast(device.type):
            loss = model(x.to(device)).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return torch.load("ckpt.pt", map_location=device)


class Net(torch.nn.Module):
    def __init__(self, device):
        super().__init__()
        self.device = device

    def forward(self, x):
        return x + torch.ones(3, device=self.device)
'''

STEP = '''import torch
from torch.nn.utils import clip_grad_norm_


def train(model, opt, scaler, batches, dev):
    for x in batches:
        with torch.autocast(dev, dtype=torch.float16):
            loss = model(x).mean()
            scaler.scale(loss).backward()  # scaled
        clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        opt.zero_grad()
'''

STEP_SAFE = STEP.replace("        clip_grad_norm_", "        scaler.unscale_(opt)\n        clip_grad_norm_")
STEP_UNSAFE = '''import torch
from torch.nn.utils import clip_grad_norm_


def train(model, opt, scaler, batches, dev):
    for x in batches:
        with torch.autocast(dev, dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()  # scaled
        scaler.unscale_(opt)
        clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
'''


def fixed(tmp_tree, source: str, *flags: str) -> tuple[str, object]:
    root = tmp_tree({"train.py": source})
    result = devlint("check", "--fix", "--no-cache", *flags, str(root / "train.py"))
    return (root / "train.py").read_text(), result


def assert_stable(text: str, unsafe: bool) -> None:
    compile(text, "train.py", "exec")
    assert fix_source(text.encode(), "train.py", ["DEV"], [], unsafe=unsafe) == (text.encode(), 0)


def test_dev206_every_spelling(tmp_tree):
    text, result = fixed(tmp_tree, SPELLINGS)
    assert text == SPELLINGS_FIXED
    assert not [f for f in lint(text, "train.py") if f.code == "DEV206"]
    assert_stable(text, unsafe=False)


def test_star_import_is_reported_without_a_fix(tmp_tree):
    source = "import torch\nfrom torch.cuda.amp import *\n"
    root = tmp_tree({"a.py": source})
    report = json.loads(devlint("check", "--no-cache", "--output-format", "json", str(root / "a.py")).stdout)
    assert [(r["code"], r["location"]["row"], r["fix"]) for r in report] == [("DEV206", 2, None)]
    assert "from torch.cuda.amp import *" in report[0]["message"]
    assert parse_findings(flake8("--select=DEV", str(root / "a.py")).stdout) == {"a.py": {(2, "DEV206")}}


def test_fallback_import_is_left_alone():
    source = '''import torch
try:
    from torch.amp import GradScaler
except ImportError:
    from torch.cuda.amp import GradScaler
scaler = GradScaler()
'''
    assert fix_source(source.encode(), "a.py", ["DEV"], [], unsafe=True)[1] == 0


def test_import_with_a_use_that_cannot_be_rewritten_is_left_alone():
    source = "import torch\nfrom torch.cuda.amp import autocast\nctx = autocast\nwith autocast():\n    pass\n"
    findings = [f for f in lint(source, "a.py") if f.code == "DEV206"]
    assert findings and all(f.fix is None for f in findings)


def test_unsafe_fixes_use_the_device_in_scope(tmp_tree):
    safe, _ = fixed(tmp_tree, TRAIN)
    assert "GradScaler(\"cuda\")" in safe and "model.cuda()" in safe  # DEV102 needs --unsafe-fixes
    text, result = fixed(tmp_tree, TRAIN, "--unsafe-fixes")
    assert text == TRAIN_FIXED
    assert lint(text, "train.py") == [] and result.returncode == 0
    assert_stable(text, unsafe=True)


def test_no_device_in_scope_means_no_device_fix():
    source = 'import torch\nm = torch.nn.Linear(2, 2).cuda()\nx = torch.ones(2).to("cuda")\n'
    findings = lint(source, "a.py")
    assert {f.code for f in findings} == {"DEV101", "DEV102"} and all(f.fix is None for f in findings)


def test_dev104_loads_on_the_cpu_without_a_device():
    source = 'import torch\nstate = torch.load(\n    "a.pt",\n    weights_only=True,\n)\n'
    new, count = fix_source(source.encode(), "a.py", ["DEV"], [], unsafe=True)
    assert count == 1 and b'weights_only=True, map_location="cpu",\n)' in new
    assert fix_source(source.encode(), "a.py", ["DEV"], [])[1] == 0  # unsafe only


def test_dev102_keeps_keywords_and_skips_an_index():
    source = "import torch\n\n\ndef f(x, device):\n    a = x.cuda(non_blocking=True)\n    b = x.cuda(1)\n    return a, b\n"
    new, count = fix_source(source.encode(), "a.py", ["DEV"], [], unsafe=True)
    assert count == 1 and b"a = x.to(device, non_blocking=True)" in new and b"b = x.cuda(1)" in new


def test_dev205_safe_and_dev201_dev204_unsafe(tmp_tree):
    safe, _ = fixed(tmp_tree, STEP)
    assert safe == STEP_SAFE
    text, result = fixed(tmp_tree, STEP, "--unsafe-fixes")
    assert text == STEP_UNSAFE and result.returncode == 0
    assert_stable(text, unsafe=True)


def test_dev201_moves_a_backward_out_of_a_top_level_block_after_blank_and_comment_lines():
    """A module-level ``with`` rendered by libcst opens with its leading lines; the fix must
    still match it by its first line (it was dropped when blank lines stood above it)."""
    source = (
        "import torch\n\nx = torch.ones(2, requires_grad=True)\n\n\n# the step\n"
        "with torch.autocast('cpu', dtype=torch.bfloat16):\n    loss = (x * 2).sum()\n    loss.backward()\n"
    )
    new, count = fix_source(source.encode(), "a.py", ["DEV201"], [], unsafe=True)
    assert count == 1
    assert new.decode().endswith("    loss = (x * 2).sum()\nloss.backward()\n")


def test_dev204_no_fix_when_an_update_exists_elsewhere():
    source = Rule204.flagged[0]
    finding = next(f for f in lint(Rule204.runnable(source), "a.py") if f.code == "DEV204")
    assert finding.fix is None  # the update after the loop would then run twice


Rule204 = next(r for r in all_rules() if r.code == "DEV204")
FIXED_CODES = {"DEV101", "DEV102", "DEV104", "DEV201", "DEV204", "DEV205", "DEV206"}
EXAMPLES = [(r, i, src) for r in all_rules() if r.code in FIXED_CODES for i, src in enumerate(r.flagged)]


@pytest.mark.parametrize("rule,index,source", EXAMPLES, ids=[f"{r.code}-{i}" for r, i, _ in EXAMPLES])
def test_fixes_on_flagged_examples(rule, index, source):
    """Each rule's fix on its flagged examples: compiles, fixes what it offers, is stable."""
    source = rule.runnable(source)
    before = [f for f in lint(source, "a.py") if f.code == rule.code]
    new, _ = fix_source(source.encode(), "a.py", ["DEV"], [], unsafe=True)
    text = new.decode()
    compile(text, "a.py", "exec")
    after = [f for f in lint(text, "a.py") if f.code == rule.code]
    assert len(after) == sum(1 for f in before if f.fix is None), (rule.code, text)
    assert_stable(text, unsafe=True)


def test_every_fixing_rule_states_its_safety():
    for rule in all_rules():
        if rule.code in FIXED_CODES:
            assert "safe" in rule.fix_safety and "no autofix" not in rule.fix_safety, rule.code


def test_import_used_under_a_version_test_is_left_alone():
    source = '''import torch
from torch.cuda.amp import GradScaler
scaler = GradScaler()
if torch.__version__ < "2.3":
    legacy = GradScaler()
'''
    findings = [f for f in lint(source, "a.py") if f.code == "DEV206"]
    assert findings and all(f.fix is None for f in findings)


def test_a_flag_conditional_keeps_its_flag():
    source = 'import torch\nimport argparse\nargs = argparse.Namespace(cuda=True)\nx = torch.ones(1, device="cuda" if args.cuda else "cpu")\n'
    new, count = fix_source(source.encode(), "a.py", ["DEV"], [], unsafe=True)
    assert count == 1 and b'device=("cuda" if torch.cuda.is_available() else "cpu") if args.cuda else "cpu")' in new
    assert_stable(new.decode(), unsafe=True)


def test_dev206_fix_then_dev101_converges_without_a_device_in_scope():
    """Issue 23: DEV206's safe fix writes GradScaler("cuda"), which DEV101 reports; with no
    device in scope (a notebook, a script) DEV101 offers the guarded choice, so --unsafe-fixes
    leaves no finding of either (DEV102's .cuda() has no fix there: a variable is the author's)."""
    source = ("import torch\nfrom torch.cuda.amp import GradScaler, autocast\nscaler = GradScaler()\n"
              "with autocast():\n    pass\n")
    safe, _ = fix_source(source.encode(), "a.py", ["DEV"], [])
    assert b'GradScaler("cuda")' in safe
    dev101 = [f for f in lint(safe.decode(), "a.py") if f.code == "DEV101"]
    assert len(dev101) == 2 and all(f.fix is not None and not f.fix.safe for f in dev101)
    new, _ = fix_source(source.encode(), "a.py", ["DEV"], [], unsafe=True)
    text = new.decode()
    assert 'scaler = GradScaler("cuda" if torch.cuda.is_available() else "cpu")' in text
    assert 'with autocast("cuda" if torch.cuda.is_available() else "cpu"):' in text
    assert lint(text, "a.py") == []
    assert fix_source(new, "a.py", ["DEV"], [], unsafe=True)[1] == 0
