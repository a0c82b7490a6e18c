"""``devlint runtime``: the command-line front end of the runtime checker.

This module imports torch only inside :func:`run`, so the top-level ``devlint`` CLI can call
:func:`add_arguments` without torch installed. TARGET loading is :mod:`devlint.runtime.target`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings

from .target import TargetError, built_under_seed, load_target, one_line

__all__ = ["add_arguments", "run", "load_target", "TargetError"]

_PROG = "devlint runtime"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``devlint runtime`` arguments to ``parser`` (works without torch)."""
    parser.add_argument(
        "target", nargs="?", metavar="TARGET",
        help="path/file.py:NAME or package.module:NAME, NAME a function returning a TrainingStep "
             "(the project root and its src/ are put on sys.path, as pytest does); default: the "
             "built-in reference step (TinyClassifier)")
    parser.add_argument(
        "--device", action="append", choices=["cpu", "cuda", "mps"], dest="device",
        help="device to check (repeatable); default cpu, cuda and mps, absent ones listed as "
             "skipped; the cpu always runs as the float32 reference")
    parser.add_argument(
        "--mode", action="append", choices=["float32", "bfloat16", "float16"], dest="mode",
        help="precision mode to check (repeatable); default all three; the cpu float32 "
             "reference always runs")
    parser.add_argument("--format", choices=["text", "json", "markdown"], default="text",
                        help="output format (default text); markdown for a CI job summary "
                             "($GITHUB_STEP_SUMMARY); with json or markdown the step's own prints "
                             "go to stderr")
    parser.add_argument("--html", metavar="FILE",
                        help="also write the report as one self-contained HTML page with charts "
                             "(needs matplotlib: devlint's [report] extra)")
    parser.add_argument("--seed", type=int, default=0, help="RNG seed for every run (default 0)")
    parser.add_argument("--k", type=float, metavar="K",
                        help="an error may be K times its calibrated noise floor (default 24)")
    parser.add_argument("--quick", type=float, metavar="Q",
                        help="errors within Q unit roundoffs pass without calibration (default 8)")
    parser.add_argument("--negligible", type=float, metavar="R",
                        help="parameters whose gradient RMS is below R times the model's are not "
                             "judged (default 1e-3)")
    parser.add_argument(
        "--cpu-kernels", choices=["auto", "emulated", "native"], default="auto",
        help="cpu bfloat16/float16 matmuls and convolutions: emulated computes them in float32 "
             "from the low-precision operands and rounds once, as a GPU's tensor cores do (fast "
             "on CPUs without bf16/fp16 units); native runs PyTorch's cpu kernels; auto "
             "(default): emulated when the largest parameter has 65536 elements or more, or the model "
             "has convolutions and the cuda autocast policy applies")
    parser.add_argument(
        "--autocast-policy", choices=["cuda", "cpu"], default="cuda",
        help="whose autocast casting rules the cpu bfloat16/float16 runs follow: cuda (default: "
             "each op cast as torch.autocast('cuda') casts it, so the cpu speaks for a GPU) or "
             "cpu (PyTorch's cpu autocast, for training with cpu autocast)")
    parser.add_argument(
        "--threads", type=int, default=None, metavar="N",
        help="torch.set_num_threads(N) before the check (default: torch's, one per core); 1 is "
             "often faster and steadier on a small or shared machine")
    parser.add_argument(
        "--world-size", type=_world_size, default=None, metavar="N",
        help="also run the step under DDP and FSDP on N local processes (gloo on the cpu, NCCL "
             "on cuda) and compare with one process; every rank loads TARGET itself")


def _world_size(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 2:
        raise argparse.ArgumentTypeError(f"must be an integer >= 2, got {text!r}")
    return n


def run(args: argparse.Namespace) -> int:
    """Run ``devlint runtime`` with parsed ``args``; print the report; return the exit code.

    Exit codes: 0 every run that ran is within tolerance and there are no findings (devices
    that are not present do not count), 1 findings or runs beyond tolerance, 2 could not run
    (torch missing, a bad target, an invalid step, a ``--device`` asked for that is not
    present): one line on stderr, no traceback; also 2, after the report, when the step
    called ``sys.exit`` (devlint never exits with the step's own code).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        try:
            import torch  # noqa: F401
        except ImportError:
            print(f"{_PROG}: torch is not installed; pip install torch (devlint's [runtime] extra)", file=sys.stderr)
            return 2
    from .compare import Tolerances
    from .reference import reference_step
    from .runs import _available, _check

    for device in getattr(args, "device", None) or []:
        reason = _available(device)
        if reason:
            print(f"{_PROG}: --device {device} asked for, but {reason}", file=sys.stderr)
            return 2
    threads = getattr(args, "threads", None)
    if threads is not None:
        if threads < 1:
            print(f"{_PROG}: --threads must be 1 or more, got {threads}", file=sys.stderr)
            return 2
        torch.set_num_threads(threads)
    html_path = getattr(args, "html", None)
    if html_path:
        try:
            import matplotlib.figure  # noqa: F401
        except ImportError:
            print(f"{_PROG}: --html needs matplotlib; pip install matplotlib (devlint's [report] "
                  "extra)", file=sys.stderr)
            return 2
    from .torchrun import job_from_env

    world_size = getattr(args, "world_size", None)
    try:
        joined = job_from_env()
    except ValueError as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return 2
    if joined is not None:  # started by torchrun: be one of its ranks, start no processes
        if world_size not in (None, joined.world_size):
            print(f"{_PROG}: --world-size {world_size}, but torchrun started {joined.world_size} "
                  "processes", file=sys.stderr)
            return 2
        world_size = joined.world_size
    tol_args = {k: getattr(args, k, None) for k in ("k", "quick", "negligible")}
    tolerances = Tolerances(**{k: v for k, v in tol_args.items() if v is not None}) \
        if any(v is not None for v in tol_args.values()) else None
    paths: list = []
    quiet = contextlib.redirect_stdout(sys.stderr) if args.format != "text" else contextlib.nullcontext()
    try:
        with quiet:
            added: list = []
            if args.target:
                step, loaded, added = load_target(args.target, args.seed, keep_path=paths)
            else:
                step, loaded = reference_step(args.seed), []
            report = _check(step, args.device, getattr(args, "mode", None), tolerances, args.seed,
                            extra_warnings=loaded,
                            world_size=world_size, target=args.target, joined=joined,
                            cpu_kernels=getattr(args, "cpu_kernels", None) or "auto",
                            policy=getattr(args, "autocast_policy", None) or "cuda")
    except TargetError as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return 2
    except (TypeError, ValueError) as exc:
        print(f"{_PROG}: cannot check the step: {one_line(exc)}", file=sys.stderr)
        return 2
    finally:
        for folder in paths:
            if folder in sys.path:
                sys.path.remove(folder)
    if report is not None:
        report.model_seeded = built_under_seed(step) if args.target else True
    if report is None:
        print(f"{_PROG}: rank {joined.rank} of {joined.world_size} sent its results to rank 0, "
              "which prints the report", file=sys.stderr)
        return 0
    if added:
        shown = [_shown(p) for p in added]
        report.notes.append("sys.path: added " + ", ".join(shown) + " to import the target")
    if args.format == "markdown":
        from .report_markdown import render

        sys.stdout.write(render(report))
    else:
        print(report.to_json() if args.format == "json" else report)
    if html_path:
        from .report_html import write

        try:
            write(report, html_path)
        except OSError as exc:
            print(f"{_PROG}: cannot write {html_path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"{_PROG}: wrote the HTML report to {html_path}", file=sys.stderr)
    if any(f.details.get("exit") for f in report.findings):
        print(f"{_PROG}: the step called sys.exit(); see the report", file=sys.stderr)
        return 2
    return 0 if report.ok else 1


def _shown(path: str) -> str:
    """``path`` relative to the working directory when it is inside it."""
    import os

    rel = os.path.relpath(path)
    return path if rel.startswith("..") else ("." if rel == "." else rel)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m devlint.runtime``."""
    parser = argparse.ArgumentParser(prog=_PROG, description="Replay a training step on every "
                                     "device and precision and explain what breaks")
    add_arguments(parser)
    return run(parser.parse_args(argv))
