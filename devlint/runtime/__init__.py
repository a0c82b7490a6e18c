"""devlint's runtime checker: replay a training step on every device and precision.

This subpackage is the only part of devlint that imports torch (install ``devlint[runtime]``).
Importing ``devlint.runtime`` itself does not import torch: the names below load on first use,
so ``from devlint.runtime import cli`` works without torch.

    from devlint.runtime import TrainingStep, check_step
    report = check_step(TrainingStep(model, (x, y), loss_fn, lambda p: torch.optim.SGD(p, lr=0.01)))
    report.assert_ok()
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__all__ = ["TrainingStep", "Parameters", "check_step", "Report", "Run", "Finding", "Tolerances",
           "DEFAULT_TOLERANCES", "reference_step", "assert_step_ok", "measure", "judge",
           "Verdict"]

_WHERE = {
    "TrainingStep": "step", "Parameters": "step", "check_step": "runs",
    "assert_step_ok": "plugin", "measure": "compare", "judge": "compare", "Verdict": "compare", "Report": "report", "Run": "report",
    "Finding": "report", "Tolerances": "compare", "DEFAULT_TOLERANCES": "compare",
    "reference_step": "reference",
}

if TYPE_CHECKING:  # pragma: no cover
    from .compare import DEFAULT_TOLERANCES, Tolerances
    from .reference import reference_step
    from .report import Finding, Report, Run
    from .runs import check_step
    from .compare import Verdict, judge, measure
    from .plugin import assert_step_ok
    from .step import Parameters, TrainingStep


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
