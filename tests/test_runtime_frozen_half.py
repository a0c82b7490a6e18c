"""A frozen float16 part of a model (a QLoRA-style base under trainable adapters) is no
master-weights problem: it has no gradient for GradScaler to refuse and no update to lose, and
autocast casts its operands. A trainable float16 parameter still is."""

import pytest

torch = pytest.importorskip("torch")

from torch import nn

from devlint.runtime import TrainingStep
from devlint.runtime.explain import master_weights


def _step(freeze: bool):
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    model[0].half()
    model[0].requires_grad_(not freeze)
    return TrainingStep(model, (torch.randn(4, 6), torch.randint(0, 3, (4,))),
                        lambda m, b: nn.functional.cross_entropy(m(b[0]).float(), b[1]),
                        lambda p: torch.optim.SGD(p, lr=0.1))


def test_frozen_half_parameters_are_no_master_weights_finding():
    assert master_weights(_step(freeze=True)) is None


def test_trainable_half_parameters_still_are():
    f = master_weights(_step(freeze=False))
    assert f is not None and f.name == "0.weight" and f.details["count"] == 2
