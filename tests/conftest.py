"""Shared test helpers: ``# expect:`` markers and the two front ends run as a user runs them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

try:  # the fuzz test's budgets (tests/test_fuzz.py): small in CI, "long" by hand
    from hypothesis import HealthCheck, settings

    settings.register_profile("fuzz", max_examples=200, deadline=None, print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                     HealthCheck.filter_too_much])
    settings.register_profile("long", settings.get_profile("fuzz"), max_examples=10_000)
    settings.load_profile(os.environ.get("DEVLINT_FUZZ", "fuzz"))
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    pass

ROOT = Path(__file__).resolve().parent.parent
LINT_FIXTURES = ROOT / "fixtures" / "lint"
MARK = re.compile(r"#\s*(expect|either):\s*([A-Z0-9| ]+)")
FINDING = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+):\s*(?P<code>DEV\d+)")


def markers(text: str, prefix: str = "DEV") -> tuple[list[tuple[int, frozenset[str]]], set[tuple[int, str]]]:
    """(required (line, alternatives), allowed {(line, code)}) from ``# expect:``/``# either:``."""
    need, allow = [], set()
    for no, line in enumerate(text.splitlines(), 1):
        for kind, body in MARK.findall(line):
            for group in body.split():
                alts = frozenset(c for c in group.split("|") if c.startswith(prefix))
                if not alts:
                    continue
                if kind == "expect":
                    need.append((no, alts))
                allow |= {(no, c) for c in alts}
    return need, allow


def mismatches(text: str, got: set[tuple[int, str]], prefix: str = "DEV") -> list[str]:
    """Human-readable misses and false positives of ``got`` against the markers in ``text``."""
    need, allow = markers(text, prefix)
    got = {g for g in got if g[1].startswith(prefix)}
    problems = [f"missed line {no}: {'|'.join(sorted(alts))}" for no, alts in need if not {(no, c) for c in alts} & got]
    problems += [f"unexpected line {no}: {code}" for no, code in sorted(got - allow)]
    return problems


def run(*args: str, cwd: Path = ROOT, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a command with this interpreter's environment (plus ``env``); never raises on a
    non-zero exit."""
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, input=stdin, timeout=600,
                          env=None if env is None else {**os.environ, **env})


#: Tests read findings line by line: the one-line format, no colour, unless a test asks.
PLAIN = {"DEVLINT_OUTPUT_FORMAT": "concise", "NO_COLOR": "1", "FORCE_COLOR": ""}


def devlint(*args: str, cwd: Path = ROOT, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "devlint", *args, cwd=cwd, stdin=stdin, env={**PLAIN, **(env or {})})


def flake8(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "flake8", "--isolated", *args, cwd=cwd)


def parse_findings(output: str) -> dict[str, set[tuple[int, str]]]:
    """``{file name: {(line, code)}}`` from ``path:line:col: CODE ...`` lines."""
    found: dict[str, set[tuple[int, str]]] = {}
    for line in output.splitlines():
        m = FINDING.match(line)
        if m:
            found.setdefault(Path(m["path"]).name, set()).add((int(m["line"]), m["code"]))
    return found


@pytest.fixture
def tmp_tree(tmp_path: Path):
    """Write ``{relative path: text or bytes}`` under a temporary folder and return it."""

    def make(files: dict[str, str | bytes]) -> Path:
        for name, content in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return tmp_path

    return make


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run a runtime test module with one intra-op torch thread, then restore the count.

    Tiny models gain nothing from intra-op threads, and on a loaded CI box idle OpenMP threads
    spinning for a core cost more than the work (measured 5x slower with 2). torch is imported
    here, not at the top, so the linter's tests run without it.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def load_runtime_zoo(name: str):
    """``fixtures/runtime/<name>.py`` as a module (the runtime trials are no package); the
    "CUDA is not available" warnings of a ``torch.autocast("cuda")`` made at import are quiet."""
    import importlib.util
    import warnings

    spec = importlib.util.spec_from_file_location(f"devlint_runtime_{name}", ROOT / "fixtures" / "runtime" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        spec.loader.exec_module(module)
    return module


def check_zoo_model(factory, seed: int = 0, **kw):
    """``check_step`` of a zoo factory's step on the CPU, seeded; a ``GradScaler("cuda")``
    without CUDA warns, which is quiet here."""
    import warnings

    import torch

    from devlint.runtime import check_step

    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return check_step(factory(), devices=["cpu"], **kw)


def assert_caught_and_named(report, kind: str, module: str | None, words: str | None) -> None:
    """A planted bug's report: it fails, its first error is of ``kind`` (the cause comes first),
    the first such error names ``module`` and one names ``words`` (name, op or message)."""
    assert not report.ok
    assert report.errors[0].kind == kind, str(report)
    found = [f for f in report.errors if f.kind == kind]
    assert module is None or found[0].module == module, str(report)
    assert words is None or any(
        words in " ".join(x or "" for x in (f.name, f.op, f.message)) for f in found), str(report)


def tiny_sgd(params):
    """Plain SGD (lr 0.1) for the runtime's small hand-made steps."""
    import torch

    return torch.optim.SGD(params, lr=0.1)


def tiny_batch():
    """A seeded CPU batch: float32 inputs of shape (8, 6) and int64 class labels in [0, 3)."""
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)


def placement_findings(loss_fn, model=None):
    """The float32 check of ``loss_fn`` over ``model`` (default ``nn.Linear(6, 3)``) on
    :func:`tiny_batch`: (the report, its device-placement findings)."""
    import torch

    from devlint.runtime import TrainingStep

    model = model if model is not None else torch.nn.Linear(6, 3)
    r = check_zoo_model(lambda: TrainingStep(model, tiny_batch(), loss_fn, tiny_sgd), modes=["float32"])
    return r, [f for f in r.findings if f.kind == "device-placement"]
