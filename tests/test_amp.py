"""The autocast-region analysis behind DEV201/DEV202: spellings, device types, dtypes, enabled."""

from __future__ import annotations

import pytest

from devlint.engine import lint

HEAD = "import torch\nimport torch as T\nmodel = torch.nn.Linear(2, 1)\n\n\ndef step(x, dev, dt):\n"


def _codes(region: str, code: str) -> bool:
    source = HEAD + f"    with {region}:\n        loss = model(x).sum()\n        loss.backward()\n"
    return any(f.code == code for f in lint(source, "t.py", select=(code,)))


@pytest.mark.parametrize(
    "region,fp16",
    [
        ('torch.autocast("cuda")', True),  # CUDA default dtype: float16
        ('torch.autocast(device_type="cuda", dtype=dt)', True),  # unknown dtype on literal cuda
        ("torch.cuda.amp.autocast()", True),
        ("torch.cuda.amp.autocast(True, torch.bfloat16)", False),  # old API: (enabled, dtype)
        ("torch.cuda.amp.autocast(dtype=dt)", True),
        ('T.amp.autocast("cpu")', False),  # CPU default dtype: bfloat16
        ("torch.cpu.amp.autocast()", False),
        ("torch.autocast(dev)", True),  # device type a variable, no dtype: float16 wherever it is CUDA
        ("torch.autocast(dev, torch.half)", True),
        ("torch.autocast(dev, dtype=torch.bfloat16)", False),
        ('torch.autocast("cuda", enabled=False)', False),
        ('torch.autocast("cuda:0", dtype=torch.float32)', False),
    ],
)
def test_float16_regions(region, fp16):
    assert _codes(region, "DEV202") is fp16


@pytest.mark.parametrize(
    "region,inside",
    [
        ("torch.autocast(dev)", True),
        ("torch.autocast(dev, enabled=dev == 'cuda')", True),
        ("torch.autocast(dev, enabled=False)", False),
        ("torch.no_grad(), torch.autocast(dev)", True),
        ("open('f') as f, T.cuda.amp.autocast(False)", False),
        ("autocast(dev)", False),  # not imported: not torch's
    ],
)
def test_backward_inside_region(region, inside):
    assert _codes(region, "DEV201") is inside


def test_imported_names_and_decorators():
    source = (
        "import torch\nfrom torch import autocast\nmodel = torch.nn.Linear(2, 1)\n\n\n"
        "@autocast('cpu')\ndef step(x):\n    model(x).sum().backward()\n"
    )
    assert [(f.line, f.code) for f in lint(source, "t.py", select=("DEV2",))] == [(8, "DEV201")]


def test_imported_names_kept_per_member_are_those_of_the_whole_module():
    """DEV206's imported names (the only names its visit_Name looks at, and those of the imports
    naming ``amp``, whose uses it keeps) kept per top-level
    statement and class member between lints of one document are those of the module walked
    whole, on random edits that add imports to members, nested blocks and the class body."""
    import random

    import libcst as cst

    from devlint.incremental import StatementCache
    from devlint.node_memo import NodeMemo
    from devlint.rules.deprecated_amp_api import _imported_names, _names_under

    lines = ["import torch", "", "", "class Net:"]
    for k in range(8):
        lines += [f"    def m{k}(self, x):", "        if x:", "            y = x", "        return x", ""]
    lines += ["", "def f():", "    pass", ""]
    added = ("import torch.cuda.amp as amp{k}", "from torch.cuda import amp as b{k}", "import os.path",
             "from m{k} import (c{k}, d{k} as e{k})")
    rng = random.Random(3)
    cache, memo = StatementCache(), {}
    for step in range(120):
        k = rng.randrange(4, len(lines))
        indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())] or rng.choice(("", "    "))
        lines.insert(k, indent + rng.choice(added).format(k=step))
        text = "\n".join(lines)
        try:
            module = cache.parse(text)
        except cst.ParserSyntaxError:
            del lines[k]
            continue
        kept = NodeMemo(memo)
        names, amp = _imported_names(module.body, kept.get)
        assert (names, amp) == tuple(map(set, _names_under(module.body))), step
        assert {f"amp{s}" for s in range(step + 1)} & names <= amp and "os" not in amp, step
        memo = kept.new
