"""A low-precision CPU run standing in for a CUDA GPU: an FFT the CPU has no bfloat16/float16
kernel for is a finding when a GPU raises for it (float16 of a size that is not a power of
two), and a note when a GPU computes it (float16, power-of-two sizes) or has no kernel for it
either (bfloat16, as the installed torch's meta device says), which a check on a GPU notes too."""

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from devlint.runtime import TrainingStep, check_step  # noqa: E402
from devlint.runtime.cufft import refusal  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):  # (batch, grid, 4): an rfft over the grid of the Linear's output
        return torch.fft.irfft(torch.fft.rfft(self.lin(x), dim=1), n=x.shape[1], dim=1)


def _step(grid):
    torch.manual_seed(0)
    return TrainingStep(Spectral(), torch.randn(3, grid, 4), lambda m, x: m(x).float().square().mean(),
                        lambda p: torch.optim.SGD(p, lr=0.1), name=f"rfft{grid}")


def test_cufft_rules():
    assert refusal(torch.bfloat16, [64]) == (refusal(torch.bfloat16, [64])[0], True)
    assert refusal(torch.float16, [50])[1] is False and "[50]" in refusal(torch.float16, [50])[0]
    assert refusal(torch.float16, [64, 32]) is None
    assert refusal(torch.complex32, [64, 12]) is not None
    assert refusal(torch.float32, [50]) is None


def test_fft_a_gpu_refuses_is_a_finding_naming_the_module_and_function():
    r = check_step(_step(50), devices=["cpu"])
    assert not r.ok
    assert [(f.kind, f.mode, f.module, f.op) for f in r.findings] == [
        ("step-error", "float16", "Spectral (the model itself)", "torch.fft.rfft")], str(r)
    assert "powers of two" in r.findings[0].message


def test_bfloat16_fft_is_a_note_saying_a_gpu_has_none_either():
    r = check_step(_step(64), devices=["cpu"], modes=["bfloat16"])
    assert r.ok, str(r)
    assert any("torch.fft.rfft has no bfloat16 kernel" in n and "a GPU has no bfloat16 FFT either" in n
               for n in r.notes), str(r)


def test_power_of_two_float16_fft_stays_a_note():
    r = check_step(_step(64), devices=["cpu"], modes=["float16"])
    assert r.ok, str(r)
    assert any("not checked" in n for n in r.notes), str(r)


class Spectrogram(nn.Module):
    def __init__(self, n_fft):
        super().__init__()
        self.n_fft = n_fft
        self.lin = nn.Linear(600, 600)

    def forward(self, x):  # an stft of the Linear's (autocast) output
        spec = torch.stft(self.lin(x), self.n_fft, hop_length=self.n_fft // 2, return_complex=True)
        return spec.abs().float().mean()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("n_fft, refused", [(200, True), (128, False)])
def test_stft_of_a_low_precision_input(n_fft, refused):
    torch.manual_seed(0)
    step = TrainingStep(Spectrogram(n_fft), torch.randn(2, 600), lambda m, x: m(x),
                        lambda p: torch.optim.SGD(p, lr=0.1), name=f"stft{n_fft}")
    r = check_step(step, devices=["cpu"], modes=["float16"])
    if refused:
        assert [(f.kind, f.op, f.module) for f in r.errors] == [
            ("step-error", "torch.stft", "Spectrogram (the model itself)")], str(r)
    else:
        assert r.ok and any("not checked" in n for n in r.notes), str(r)
