"""What a GPU refuses besides mixed devices, found on the stand-in: ``Tensor.numpy()`` of a
device tensor, a device's random op driven by a CPU ``torch.Generator``, ``pack_padded_sequence``
lengths on the device, a CPU tensor indexed by device indices; a generator made for the device
(``torch.Generator(device=x.device)``), lengths given with ``.cpu()`` and CPU indices into a
device tensor pass. CPU only."""

import pytest
from conftest import check_zoo_model, placement_findings, tiny_batch, tiny_sgd

torch = pytest.importorskip("torch")

from devlint.runtime import TrainingStep, standin  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F = torch.nn.functional
nn = torch.nn


# --- Tensor.numpy() on the device --------------------------------------------------------------


def _numpy_weighted(host):
    def loss_fn(model, batch):
        x, y = batch
        losses = F.cross_entropy(model(x), y, reduction="none")
        d = losses.detach()
        rank = (d.cpu() if host else d).numpy().argsort().argsort()  # focus on the hardest
        return (losses * torch.as_tensor(rank, device=x.device)).mean()
    return loss_fn


def test_numpy_of_a_device_tensor_is_a_placement_finding_named_at_numpy():
    r, found = placement_findings(_numpy_weighted(host=False))
    assert [(f.op, f.module, f.severity) for f in found] == [("Tensor.numpy", "loss_fn (outside the model)", "error")]
    assert "can't convert cuda:0" in found[0].message and not [f for f in r.findings if f.kind == "probe-incomplete"]


def test_numpy_after_cpu_passes():
    r, found = placement_findings(_numpy_weighted(host=True))
    assert r.ok and not found, str(r)


def test_numpy_of_a_tagged_tensor_reads_its_data():
    t = standin.Tagged(torch.tensor([1.0, 2.5]))
    assert t.numpy().tolist() == [1.0, 2.5]


# --- generators -----------------------------------------------------------------------------------


class _Noisy(nn.Module):
    def __init__(self, generator=None):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.gen = generator

    def forward(self, x):
        gen = self.gen if self.gen is not None else torch.Generator(device=x.device).manual_seed(5)
        return self.fc(x + 0.1 * torch.randn(x.shape, generator=gen, device=x.device))


def test_a_generator_made_on_the_device_passes():
    # torch.Generator(device="meta") raises: the stand-in's is a CPU generator it accepts
    r, _ = placement_findings(lambda m, b: F.cross_entropy(m(b[0]), b[1]), _Noisy())
    assert r.ok and not r.findings, str(r)


def test_a_cpu_generator_on_the_device_is_named():
    _, found = placement_findings(lambda m, b: F.cross_entropy(m(b[0]), b[1]), _Noisy(torch.Generator().manual_seed(5)))
    assert [(f.name, f.op, f.module) for f in found] == [("gen", "aten.randn.generator", "_Noisy (the model itself)")]
    assert "Expected a 'cuda' device type for generator" in found[0].message


def test_an_in_place_random_op_with_a_cpu_generator_is_named():
    gen = torch.Generator().manual_seed(5)

    def loss_fn(model, batch):
        x, y = batch
        return F.cross_entropy(model(x + torch.empty_like(x).normal_(generator=gen)), y)

    r, found = placement_findings(loss_fn)
    assert [(f.name, f.op) for f in found] == [("torch.Generator", "aten.normal_.default")], str(r)


def test_generators_are_told_apart_by_state_and_restored():
    real = torch.Generator
    with standin.stand_in(nn.Linear(1, 1)):
        made = torch.Generator(device=standin.STAND_IN).manual_seed(1)
        other = real().manual_seed(2)
        assert not standin.host_generator_key(made) and standin.host_generator_key(other)
        assert torch.Generator(device="cpu").device.type == "cpu"
    assert torch.Generator is real and standin.host_generator_key(made)


def test_every_generator_is_still_a_torch_generator_on_the_stand_in():
    plain = torch.Generator()
    with standin.stand_in(nn.Linear(1, 1)):
        assert torch.Generator is standin.StandInGenerator
        assert isinstance(plain, torch.Generator) and isinstance(torch.default_generator, torch.Generator)
        assert issubclass(type(plain), torch.Generator)


# --- pack_padded_sequence lengths ------------------------------------------------------------------


class _Packed(nn.Module):
    def __init__(self, host):
        super().__init__()
        self.rnn = nn.GRU(6, 4, batch_first=True)
        self.fc = nn.Linear(4, 3)
        self.host = host

    def forward(self, x, lengths):
        lengths = lengths.cpu() if self.host else lengths
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        return self.fc(self.rnn(packed)[1][-1])


@pytest.mark.parametrize("host", [True, False], ids=["lengths.cpu()", "lengths on the device"])
def test_pack_padded_sequence_takes_its_lengths_on_the_cpu(host):
    x, y = tiny_batch()
    batch = x.view(8, 3, 2).repeat(1, 1, 3), torch.tensor([3, 1, 2, 3, 2, 1, 3, 2]), y

    def loss_fn(model, batch):
        x, lengths, y = batch
        return F.cross_entropy(model(x, lengths), y)

    r = check_zoo_model(lambda: TrainingStep(_Packed(host), batch, loss_fn, tiny_sgd), modes=["float32"])
    found = [(f.op, f.name, f.module) for f in r.findings if f.kind == "device-placement"]
    if host:
        assert r.ok and not found, str(r)
    else:
        assert found == [("nn.utils.rnn.pack_padded_sequence", "lengths of shape [8]", "_Packed (the model itself)")]


# --- indexing: CPU indices into a device tensor pass, device indices into a CPU tensor do not ----


class _Schedule(nn.Module):
    """A per-class scale looked up by the batch's labels, the table a buffer or a plain attribute."""

    def __init__(self, buffer):
        super().__init__()
        self.lin = nn.Linear(6, 3)
        table = torch.linspace(0.5, 2.0, 3)
        if buffer:
            self.register_buffer("table", table)
        else:
            self.table = table

    def forward(self, x, y):
        return self.lin(x) * self.table[y].unsqueeze(1)


def _scheduled(model, batch):
    x, y = batch
    return F.cross_entropy(model(x, y), y)


def test_a_cpu_table_indexed_by_device_indices_is_named():
    r, found = placement_findings(_scheduled, _Schedule(buffer=False))
    assert not r.ok and found and found[0].name == "table", str(r)
    assert found[0].op == "aten.index.Tensor" and "indices should be either on cpu" in found[0].message


def test_a_buffer_table_indexed_by_device_indices_passes():
    r, found = placement_findings(_scheduled, _Schedule(buffer=True))
    assert r.ok and not found, str(r)


def test_cpu_indices_into_a_device_tensor_pass():
    def loss(model, batch):
        x, y = batch
        rows = torch.randint(0, len(x), (len(x),), generator=torch.Generator().manual_seed(0))
        return F.cross_entropy(model(x)[rows], y[rows])

    r, found = placement_findings(loss)
    assert r.ok and not found, str(r)
