"""Names of the CPU tensors a step never moves: a global by its name and file, a variable a
``loss_fn`` closes over by its name, a tensor torch's own code makes for the step by the torch
function the step called, a factory inside a custom autograd Function by that Function's
method. CPU only."""

import pytest
from conftest import placement_findings

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F = torch.nn.functional
nn = torch.nn


#: A module-level constant, never moved (as a training script keeps ImageNet statistics).
GLOBAL_SCALE = torch.tensor([1.0, 2.0, 0.5])


# --- CPU tensors named by the name the step reaches them by ---------------------------------------


def test_a_closed_over_cpu_tensor_is_named():
    weights = torch.tensor([1.0, 2.0, 0.5])  # class weights, never moved

    def loss_fn(model, batch):
        x, y = batch
        return F.cross_entropy(model(x) * weights, y)

    r, found = placement_findings(loss_fn)
    assert [f.name for f in found] == ["weights (a variable the loss_fn closes over)"], str(r)


class _GlobalScaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(x) * GLOBAL_SCALE


def test_a_global_cpu_tensor_is_named_with_its_file():
    r, found = placement_findings(lambda m, b: F.cross_entropy(m(b[0]), b[1]), _GlobalScaled())
    assert [(f.name, f.module) for f in found] == [
        ("GLOBAL_SCALE (a global of test_runtime_placement_names.py)", "_GlobalScaled (the model itself)")], str(r)


def test_a_cpu_tensor_inside_another_object_is_still_said_by_its_shape():
    class Extra:  # an object devlint does not walk, made before the step
        def __init__(self):
            self.bias = torch.ones(3)

    extra = Extra()

    def loss_fn(model, batch):
        x, y = batch
        return F.cross_entropy(model(x) + extra.bias, y)

    r, found = placement_findings(loss_fn)
    assert [f.name for f in found] == ["tensor of shape [3]"], str(r)


def test_a_cpu_tensor_torch_makes_is_named_by_the_torch_function_called():
    def loss_fn(model, batch):
        x, y = batch
        lam = torch.distributions.Uniform(0.0, 1.0).sample((1,))  # its bounds: CPU tensors
        return F.cross_entropy(model(x) * lam, y)

    r, found = placement_findings(loss_fn)
    assert len(found) == 1 and "called by Uniform.__init__ in torch.distributions.uniform" in found[0].name, str(r)


# --- a CPU tensor reached through a 0-dim view ---------------------------------------------------


class _TimeGrid(nn.Module):
    """A time grid kept as a plain attribute: ``ts[i]`` is a 0-dim CPU tensor (which CUDA
    accepts as a scalar), but its ``expand`` to a column is not, and ``torch.cat`` with the
    device's features refuses it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(7, 3)
        self.ts = torch.linspace(0, 1, 4)

    def forward(self, x):
        return self.fc(torch.cat([x, self.ts[1].expand(x.shape[0], 1)], 1))


def test_a_cpu_attribute_reached_through_a_0_dim_view_is_named_not_the_view():
    r, found = placement_findings(lambda m, b: F.cross_entropy(m(b[0]), b[1]), _TimeGrid())
    assert found, str(r)
    assert found[0].name is not None and "ts" in found[0].name.split(" ")[0], str(r)
    assert "aten.expand" not in found[0].message, str(r)


# --- a factory inside a custom autograd Function ---------------------------------------------------


class _ClipGrad(torch.autograd.Function):
    """Identity forward; the backward masks the gradient with a mask made without device=."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (torch.ones(x.shape) * (x.abs() <= 1))


def test_a_factory_inside_a_function_backward_names_the_function():
    r, found = placement_findings(lambda m, b: F.cross_entropy(_ClipGrad.apply(m(b[0])), b[1]))
    assert not r.ok and found and found[0].op == "aten.mul.Tensor", str(r)
    assert "inside _ClipGrad.backward (a custom torch.autograd.Function)" in found[0].message
