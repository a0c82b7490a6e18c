"""The distributed runtime check: where its tolerance comes from, and what it costs.

    .venv/bin/python benchmarks/bench_distributed.py            # both tables
    .venv/bin/python benchmarks/bench_distributed.py --calibration-only

Table 1 (calibration of ``GRAD_RTOL``): for correct float32 models, the scale-free relative L2
error between the full-batch gradient and the average of per-shard gradients (what DDP
computes, up to its all-reduce order), worst parameter, on the CPU. The bugs the check looks for
give errors of 1e-2 and more.

Table 2 (cost): wall seconds of ``check_distributed`` (world size 2, gloo on the CPU, DDP then
FSDP) next to the one-process ``check_step`` (CPU, all modes), per fixture of
``fixtures/runtime/distributed_steps.py``, with the verdict and the kinds of findings. The first
distributed check of a process also imports ``torch._dynamo`` (DDP needs it): listed apart.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _errors(model, make, batch, world_size):
    from devlint.runtime.dist_compare import rel_errors as _rel_errors
    from devlint.runtime.sharding import shard_batch

    def grads(b):
        m = copy.deepcopy(model)
        F.cross_entropy(m(b[0]), b[1]).backward()
        return {n: p.grad.detach().clone() for n, p in m.named_parameters()}

    b = make(batch)
    full = grads(b)
    shards = [grads(shard_batch(b, r, world_size)) for r in range(world_size)]
    avg = {n: sum(s[n] for s in shards) / world_size for n in full}
    return max(_rel_errors(avg, full).values())


class _LSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 32, batch_first=True)
        self.out = nn.Linear(32, 3)

    def forward(self, x):
        return self.out(self.lstm(x)[0][:, -1])


def calibration() -> float:
    torch.manual_seed(0)
    models = {
        "MLP 10-64-64-2": (nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                         nn.Linear(64, 2)),
                           lambda n: (torch.randn(n, 10), torch.randint(0, 2, (n,)))),
        "CNN 2 conv + linear": (nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Conv2d(16, 16, 3), nn.ReLU(),
                                              nn.Flatten(), nn.Linear(16 * 12 * 12, 5)),
                                lambda n: (torch.randn(n, 3, 16, 16), torch.randint(0, 5, (n,)))),
        "Transformer encoder x2": (nn.Sequential(nn.TransformerEncoder(
            nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2), nn.Flatten(),
            nn.Linear(32 * 8, 3)), lambda n: (torch.randn(n, 8, 32), torch.randint(0, 3, (n,)))),
        "LSTM 8-32 + linear": (_LSTM(), lambda n: (torch.randn(n, 12, 8), torch.randint(0, 3, (n,)))),
    }
    print("| model | batch | ranks | worst parameter error |")
    print("|---|---|---|---|")
    worst = 0.0
    for name, (model, make) in models.items():
        for n in (4, 16, 64):
            for ws in (2, 4):
                e = _errors(model, make, n, ws)
                worst = max(worst, e)
                print(f"| {name} | {n} | {ws} | {e:.1e} |")
    from devlint.runtime.distributed import GRAD_RTOL

    print(f"\nworst {worst:.1e}; GRAD_RTOL {GRAD_RTOL:g} ({GRAD_RTOL / worst:.0f}x headroom)\n")
    return worst


def cost() -> None:
    from devlint.runtime import check_step
    from devlint.runtime.distributed import check_distributed

    spec = importlib.util.spec_from_file_location("bench_dist_steps", ROOT / "fixtures/runtime/distributed_steps.py")
    steps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(steps)
    t = time.perf_counter()
    import torch._dynamo  # noqa: F401 - what DDP imports on first use
    print(f"import torch._dynamo (once per process, before the first fork): {time.perf_counter() - t:.1f} s\n")
    names = ["conv_bn", "transformer_lm", "clipped_with_schedule", "custom_step", "sync_batchnorm",
             "unused_branch", "batchnorm_uneven", "rank_dependent_init", "summed_loss",
             "rank_dependent_forward", "rank1_raises", "rank0_collective"]
    print("| step | one process s | DDP+FSDP x2 s | verdict | findings |")
    print("|---|---|---|---|---|")
    from devlint.runtime.reference import reference_step

    for name in ["reference", *names]:
        factory = reference_step if name == "reference" else getattr(steps, name)
        one = "-"
        if name not in ("rank0_collective",):
            t = time.perf_counter()
            check_step(factory(), devices=["cpu"])
            one = f"{time.perf_counter() - t:.2f}"
        t = time.perf_counter()
        step = factory if name == "rank_dependent_init" else factory()
        report = check_distributed(step, 2, devices=["cpu"], timeout=5.0)
        wall = time.perf_counter() - t
        kinds = ", ".join(dict.fromkeys(f.kind for f in report.findings)) or "-"
        print(f"| {name} | {one} | {wall:.2f} | {'ok' if report.ok else 'failed'} | {kinds} |")
    print(f"\nmachine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, torch {torch.__version__}; "
          "rank0_collective hangs by design (timeout 5 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration-only", action="store_true")
    args = parser.parse_args()
    worst = calibration()
    if not math.isfinite(worst):
        raise SystemExit("non-finite calibration error")
    if not args.calibration_only:
        cost()


if __name__ == "__main__":
    main()
