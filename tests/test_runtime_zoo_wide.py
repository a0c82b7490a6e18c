"""The runtime checker on the wider zoo (fixtures/runtime/zoo_wide.py): architectures beyond
zoo.py pass, and the planted bugs there are caught and named. CPU only; the models in
``zoo_wide.LONG`` run only with ``DEVLINT_ZOO=long``."""

import importlib.util
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from devlint.runtime import check_step  # noqa: E402

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "runtime"
_spec = importlib.util.spec_from_file_location("devlint_runtime_zoo_wide", HERE / "zoo_wide.py")
zoo_wide = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo_wide)
_spec = importlib.util.spec_from_file_location("devlint_runtime_zoo_for_wide", HERE / "zoo.py")
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)

LONG = os.environ.get("DEVLINT_ZOO") == "long"


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models gain nothing from intra-op threads, and on a loaded CI box idle OpenMP
    threads spinning for a core cost more than the work (measured: 5x slower with 2)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _report(factory):
    torch.manual_seed(0)
    return check_step(factory(), devices=["cpu"])


def _correct():
    skip = [] if LONG else [pytest.mark.skip(reason="slow on CPU: set DEVLINT_ZOO=long")]
    return [pytest.param(f, id=f.__name__, marks=skip if f in zoo_wide.LONG else [])
            for f in zoo_wide.CORRECT]


def test_the_wide_zoo_is_new_and_large_enough():
    names = {f.__name__ for f in zoo_wide.CORRECT}
    assert len(names) >= 20
    assert not names & {f.__name__ for f in zoo.CORRECT}
    assert len(zoo_wide.PLANTED) >= 4


@pytest.mark.parametrize("factory", _correct())
def test_correct_model_passes(factory):
    r = _report(factory)
    assert r.ok, str(r)
    rows = {run.mode: run for run in r.runs if run.device == "cpu"}
    assert [rows[m].status for m in ("float32", "bfloat16", "float16")] == ["reference", "ok", "ok"], str(r)
    assert not [f for f in r.findings if f.severity == "error"], str(r)


@pytest.mark.parametrize("factory", list(zoo_wide.PLANTED), ids=lambda f: f.__name__)
def test_planted_bug_is_caught_and_named(factory):
    kind, module, name = zoo_wide.PLANTED[factory]
    r = _report(factory)
    assert not r.ok
    found = [f for f in r.errors if f.kind == kind]
    assert found, str(r)
    assert any(f.module == module for f in found), [f.module for f in found]
    if name is not None:
        assert any(name in (f.name or "") for f in found), [f.name for f in found]
    if kind == "device-placement":
        assert {f.kind for f in r.errors} == {"device-placement"}, str(r)


def test_naive_softmax_overflow_is_float16_only():
    r = _report(zoo_wide.llama_naive_softmax_fp16)
    (f,) = [f for f in r.findings if f.kind == "non-finite"]
    assert f.mode == "float16" and f.op == "aten.exp.default" and "bfloat16 runs clean" in f.message
    assert next(run for run in r.runs if run.mode == "bfloat16").status == "ok"


def test_list_index_on_the_stand_in():
    """``t[..., [0, 2]]`` on a stand-in tensor indexes real data (Falcon's multi-query split)."""
    from devlint.runtime import standin

    x = torch.arange(12.0).view(3, 4)
    with standin.stand_in(torch.nn.Identity()) as (mode, _):
        t = x.to(standin.STAND_IN)
        got = t[:, [0, 2]]
        t[[1], :] = 0.0
        assert isinstance(got, standin.Tagged) and not mode.mixes
    assert torch.equal(got.elem, x[:, [0, 2]])
    assert t.elem[1].eq(0).all()


def test_in_place_transpose_keeps_the_wrapper_shape():
    """nn.GRU(batch_first=True) transposes its output in place inside its C++ kernel."""
    from devlint.runtime import standin

    gru = torch.nn.GRU(4, 4, batch_first=True)
    x = torch.randn(3, 5, 4)
    want, _ = gru(x)
    with standin.stand_in(gru):
        standin.to_stand_in(gru)
        out, _ = gru(x.to(standin.STAND_IN))
        assert out.shape == out.elem.shape == (3, 5, 4) and out.stride() == out.elem.stride()
        flat = out.flatten(0, 1)
    assert torch.allclose(flat.elem, want.flatten(0, 1))
