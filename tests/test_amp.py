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
