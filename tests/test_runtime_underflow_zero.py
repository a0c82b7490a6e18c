"""A float16 run whose first inf/NaN op is ``log`` of a zero that float32 does not have names
the underflow that made the zero: here autocast's own cast of tiny float32 probabilities to
float16 for a matmul (``_to_copy``), which the underflow replay now compares with its input."""

import warnings

import pytest

torch = pytest.importorskip("torch")

from torch import nn

from devlint.runtime import TrainingStep, check_step


class TinyProbabilities(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 4)
        self.mix = nn.Parameter(torch.ones(4, 4) / 4)

    def forward(self, x):
        p = torch.softmax(self.lin(x), -1) * 1e-9  # float32 on a GPU (softmax is on CUDA's float32 list)
        return (p @ self.mix).sum(-1).log()  # the matmul casts p to float16: 0


def test_log_of_an_underflowed_zero_names_the_underflow():
    torch.manual_seed(0)
    step = TrainingStep(TinyProbabilities(), torch.randn(6, 5), lambda m, b: -m(b).float().mean(),
                        lambda p: torch.optim.SGD(p, lr=0.01))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        r = check_step(step, devices=["cpu"])
    (f,) = [f for f in r.errors if f.kind == "non-finite" and f.mode == "float16"]
    assert f.op == "aten.log.default", str(r)
    assert f.details["flushed"]["op"] == "aten._to_copy.default", str(r)
    assert "underflows" in f.message and "TinyProbabilities (the model itself)" in f.message
    bf16 = [f for f in r.errors if f.mode == "bfloat16"]
    assert not bf16, str(r)  # bfloat16 has float32's exponent range: no zero, no finding
