"""The built-in reference step: the seed example's TinyClassifier training step."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .step import TrainingStep

__all__ = ["TinyClassifier", "reference_step"]


class TinyClassifier(nn.Module):
    """Linear(10, 16) -> ReLU -> Linear(16, 2): input ``[N, 10]`` float32, output ``[N, 2]`` logits."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(10, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _cross_entropy(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def _sgd(params) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.01)


def reference_step(seed: int = 0) -> TrainingStep:
    """The seed example's step on the CPU: TinyClassifier, a batch of 4x10 float32 inputs and
    4 int64 class labels in {0, 1}, cross entropy, SGD with lr 0.01.

    ``torch.manual_seed(seed)`` is set first, then the model, inputs and labels are drawn in
    the seed example's order, so seed 0 reproduces its numbers.
    """
    torch.manual_seed(seed)
    model = TinyClassifier()
    x = torch.randn(4, 10)
    y = torch.randint(0, 2, (4,))
    return TrainingStep(model, (x, y), _cross_entropy, _sgd, name="reference step (TinyClassifier)")
