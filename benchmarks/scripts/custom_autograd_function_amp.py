"""A custom fused op as a torch.autograd.Function used inside a bf16/fp16 autocast training step,
plus a second Function that is decorated correctly."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.amp import custom_fwd, custom_bwd


class ScaledSiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):  # expect: DEV210
        ctx.save_for_backward(x, scale)
        return x * torch.sigmoid(x) * scale

    @staticmethod
    def backward(ctx, grad_out):
        x, scale = ctx.saved_tensors
        s = torch.sigmoid(x)
        grad_x = grad_out * scale * (s * (1 + x * (1 - s)))
        grad_scale = (grad_out * x * s).sum().reshape(scale.shape)
        return grad_x, grad_scale


class LinearFn(torch.autograd.Function):
    @staticmethod
    @custom_fwd(device_type="cuda")  # either: DEV101
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x @ weight.t()

    @staticmethod
    @custom_bwd(device_type="cuda")  # either: DEV101
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        return grad_out @ weight, grad_out.t() @ x


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim, dim) / dim ** 0.5)
        self.scale = nn.Parameter(torch.ones(1))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        h = LinearFn.apply(self.norm(x), self.weight)
        return x + ScaledSiLU.apply(h, self.scale)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    model = nn.Sequential(*[Block(256) for _ in range(4)], nn.Linear(256, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    for step in range(100):
        x = torch.randn(64, 256, device=device)
        y = torch.randint(0, 10, (64,), device=device)
        with torch.autocast(device_type=device.type, dtype=amp_dtype):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if step % 10 == 0:
            print(step, loss.item())


if __name__ == "__main__":
    main()
