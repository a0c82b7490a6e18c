"""Recurrent layers on the stand-in run as one op (devlint.runtime.standin_rnn): the same
gradients as a plain CPU run, a few dispatched ops instead of one per time step, and a CPU
initial state still a placement finding. CPU only."""

import pytest
from conftest import placement_findings

torch = pytest.importorskip("torch")

from devlint.runtime import replay, standin, standin_rnn  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

nn = torch.nn
F = torch.nn.functional


class _Seq(nn.Module):
    """A recurrent layer over a (8, 5, 6) view of the batch, padded or packed."""

    def __init__(self, kind, packed=False, cpu_state=False):
        super().__init__()
        self.rnn = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind](6, 6, num_layers=2, batch_first=True)
        self.head = nn.Linear(6, 3)
        self.kind, self.packed, self.cpu_state = kind, packed, cpu_state

    def forward(self, x):
        seq = x[:, None, :].expand(-1, 5, -1) * torch.linspace(0.5, 1.5, 5, device=x.device)[None, :, None]
        state = None
        if self.cpu_state:  # the bug: an initial state made without device=
            h0 = torch.zeros(2, x.shape[0], 6)
            state = (h0, h0) if self.kind == "lstm" else h0
        if self.packed:
            lengths = torch.tensor([5, 4, 3, 5, 2, 5, 1, 4])
            seq = nn.utils.rnn.pack_padded_sequence(seq, lengths, batch_first=True, enforce_sorted=False)
            out, _ = self.rnn(seq, state)
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=5)
        else:
            out, _ = self.rnn(seq, state)
        return self.head(out.mean(1))


def _loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("packed", [False, True])
def test_the_stand_in_reference_equals_a_plain_run(kind, packed):
    from conftest import tiny_batch, tiny_sgd

    from devlint.runtime import TrainingStep

    torch.manual_seed(0)
    step = TrainingStep(_Seq(kind, packed), tiny_batch(), _loss, tiny_sgd)
    ref = replay.run_once(step, "cpu", "float32", 0, keep=True, stand_in=True)
    plain = replay.run_once(step, "cpu", "float32", 0, keep=True)
    assert ref.error is None and not ref.mixes, ref.error
    assert ref.loss == pytest.approx(plain.loss, rel=1e-6)
    for name, g in plain.grads.items():
        torch.testing.assert_close(ref.grads[name], g, rtol=1e-5, atol=1e-7, msg=name)


def test_a_recurrent_layer_is_a_few_ops_on_the_stand_in():
    torch.manual_seed(0)
    model = _Seq("lstm")
    x = torch.randn(8, 6)
    with standin.stand_in(model, backward_labels=False) as (mode, _), standin_rnn.recurrent_layers():
        standin.to_stand_in(model)
        model(x.to(standin.STAND_IN)).sum().backward()
    # per time step it was ~30 ops a layer and direction, forward and backward (~700 here)
    assert mode.ops < 80, mode.ops


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_cpu_initial_state_is_named_at_the_layer_op(kind):
    _, found = placement_findings(_loss, _Seq(kind, cpu_state=True))
    assert found, "no placement finding"
    assert found[0].op == f"aten.{kind}.input" and "aten.zeros" in found[0].name, found[0]
    assert found[0].module == "_Seq (the model itself)"  # where the state was made
