"""CUDA autocast's casting rules on the CPU (devlint.runtime.autocast_policy): the table is the
dispatcher's own list for the pinned torch, every entry cites its source, and each rule casts
as CUDA autocast does; CPU autocast is restored on exit."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from devlint.runtime import autocast_policy as ap  # noqa: E402

PINNED = torch.__version__.startswith("2.13.")


@pytest.mark.skipif(not PINNED, reason="the table is written for torch 2.13")
def test_the_table_is_exactly_the_ops_with_an_autocast_cuda_kernel():
    cuda = ap.dispatcher_ops("AutocastCUDA")
    assert "aten::mv" in cuda and "aten::exp" in cuda and "aten::cat" not in cuda
    assert set(ap.CUDA_RULES) - cuda == set(), "in the table, no AutocastCUDA kernel"
    assert cuda - set(ap.CUDA_RULES) == set(), "an AutocastCUDA kernel the table lacks"
    with ap.policy("cuda") as handled:
        assert handled == cuda


def test_every_entry_names_its_rule_and_cites_a_versioned_source():
    rules = {"lower", "fp32", "fp32_dtype", "fp32_append", "promote", "banned"}
    for op, (rule, doc, source) in ap.CUDA_RULES.items():
        assert rule in rules, op
        assert "torch 2.13" in ap.SOURCES[source], op
        if doc is not None:  # named in the AMP docs: cited to the docs section of its rule
            assert ap.SOURCES[source].startswith("AMP docs"), op
    assert ap.CUDA_RULES["aten::mv"] == ("lower", "mv", "docs-f16")
    assert ap.CUDA_RULES["aten::softmax.int"][0] == "fp32_dtype"


def _dtypes(policy):
    x = torch.randn(8, 8)
    v = torch.randn(8)
    out = {}
    with ap.policy(policy), torch.autocast("cpu", dtype=torch.float16):
        h = x @ x  # float16 under either
        out["mv"] = torch.mv(x, v).dtype
        out["lstm_cell"] = torch.nn.LSTMCell(8, 8)(x)[0].dtype
        out["exp"] = h.exp().dtype
        out["softmax"] = h.softmax(-1).dtype
        out["softmax_dtype_kept"] = h.softmax(-1, dtype=torch.float16).dtype
        out["sum"] = h.sum(1).dtype
        out["norm"] = h.norm().dtype
        out["layer_norm"] = F.layer_norm(h, (8,)).dtype
        out["addcmul"] = torch.addcmul(h, h, x).dtype
        out["trace"] = torch.trace(h).dtype
        out["float64_mv"] = torch.mv(x.double(), v.double()).dtype
    return out


def test_cuda_rules_cast_op_by_op_and_cpu_rules_are_left_alone():
    f16, f32 = torch.float16, torch.float32
    assert _dtypes("cuda") == {"mv": f16, "lstm_cell": f16, "exp": f32, "softmax": f32,
                               "softmax_dtype_kept": f16, "sum": f32, "norm": f32, "layer_norm": f32,
                               "addcmul": f32, "trace": f16, "float64_mv": torch.float64}
    cpu = _dtypes("cpu")  # CPU autocast: mv and LSTMCell untouched, exp in float16, trace in float32
    assert (cpu["mv"], cpu["lstm_cell"], cpu["exp"], cpu["trace"]) == (f32, f32, f16, f32)


def test_binary_cross_entropy_raises_as_on_a_gpu_and_the_library_is_removed():
    p, t = torch.rand(4), torch.rand(4)
    with ap.policy("cuda"), torch.autocast("cpu", dtype=torch.bfloat16):
        assert ap.current() == "cuda"
        with pytest.raises(ap.BannedUnderAutocast, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, t)
    assert ap.current() == "cpu"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert F.binary_cross_entropy(p, t).dtype == torch.float32  # CPU autocast's own rule again
        assert torch.mv(torch.randn(3, 3), torch.randn(3)).dtype == torch.float32


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown autocast policy"):
        with ap.policy("tpu"):
            pass


def test_recurrent_layers_follow_cudnn_autocast_rounded_inputs_float32_math():
    # _cudnn_rnn's autocast kernel exists only in CUDA builds: no CPU dispatcher lists these ops
    assert not set(ap.CUDNN_RNN) & ap.dispatcher_ops("AutocastCUDA")
    assert all(ap.SOURCES[src] for _, _, src in ap.CUDNN_RNN.values())
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4, batch_first=True)
    x = torch.randn(2, 5, 3)
    with ap.policy("cuda"), torch.autocast("cpu", dtype=torch.float16):
        out, (h, c) = lstm(x)
        big, _ = lstm(x * 1e5)  # past 65504: inf once cast, as under cuDNN
    assert (out.dtype, h.dtype, c.dtype) == (torch.float16,) * 3
    assert not torch.isfinite(big).all()
    with torch.no_grad():  # the float32 layer on the inputs and weights rounded to float16
        ref = torch.nn.LSTM(3, 4, batch_first=True)
        for p, q in zip(ref.parameters(), lstm.parameters()):
            p.copy_(q.half().float())
        want = ref(x.half().float())[0].half()
    assert torch.equal(out, want)


def _nested():
    h = torch.randn(8, 8).half()
    y = torch.randint(0, 8, (8,))
    with ap.policy("cuda"), torch.autocast("cpu", dtype=torch.float16):
        out = {"cross_entropy": F.cross_entropy(h, y).dtype,  # its parts get the rules too
               "cat": torch.cat([h, torch.randn(8, 8)]).dtype}  # CPU autocast's own rule skipped
        with torch.autocast("cpu", enabled=False):
            out["exp_off"] = h.exp().dtype
        out["exp_on_again"] = h.exp().dtype
    with torch.autocast("cpu", dtype=torch.float16):
        out["exp_after"] = h.exp().dtype
    return out


def test_kernels_kept_for_the_process_cast_as_kernels_registered_per_check(monkeypatch):
    kept = (_dtypes("cuda"), _nested())
    assert ap._KEPT and ap._KEPT[0] is not None, "the kernels were not kept at AutocastPrivateUse1"
    assert kept[1] == {"cross_entropy": torch.float32, "cat": torch.float32, "exp_off": torch.float16,
                       "exp_on_again": torch.float32, "exp_after": torch.float16}
    monkeypatch.setattr(ap, "_KEPT", [None])  # as where a backend claims PrivateUse1
    assert (_dtypes("cuda"), _nested()) == kept


def test_a_fallback_already_at_the_key_keeps_the_per_check_registration():
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from devlint.runtime import autocast_policy as ap\n"
        "lib = torch.library.Library('_', 'IMPL')\n"
        "lib.fallback(torch.library.fallthrough_kernel, 'AutocastPrivateUse1')\n"
        "h = torch.randn(4, 4).half()\n"
        "with ap.policy('cuda'), torch.autocast('cpu', dtype=torch.float16):\n"
        "    print(h.exp().dtype, torch.mv(torch.randn(4, 4), torch.randn(4)).dtype, ap._KEPT)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["torch.float32", "torch.float16", "[None]"]


def test_norm_called_from_cpp_with_its_defaults_runs_in_float32():
    """``F.pairwise_distance`` calls ``at::norm(x, p, dim, keepdim)`` from C++, which reaches
    the ``fp32_append`` kernel without ``keepdim``: the overload with a ``dtype`` needs it."""
    x = torch.randn(4, 8)
    with ap.policy("cuda"), torch.autocast("cpu", dtype=torch.float16):
        h = x @ x.t()
        assert F.pairwise_distance(h, h + 1).dtype == torch.float32
        assert torch.norm(h, 3).dtype == torch.float32
