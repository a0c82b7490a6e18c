"""A DDPM training loop in the lucidrains style: buffers for the schedule, bf16 autocast without a
GradScaler (bf16 needs none), EMA weights, clip on unscaled gradients."""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

from unet import Unet
from data import ImageFolderDataset


def cosine_beta_schedule(timesteps, s=0.008):
    steps = timesteps + 1
    x = torch.linspace(0, timesteps, steps, dtype=torch.float64)
    alphas_cumprod = torch.cos(((x / timesteps) + s) / (1 + s) * math.pi * 0.5) ** 2
    alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
    betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
    return torch.clip(betas, 0, 0.999)


def extract(a, t, x_shape):
    b, *_ = t.shape
    out = a.gather(-1, t)
    return out.reshape(b, *((1,) * (len(x_shape) - 1)))


class GaussianDiffusion(nn.Module):
    def __init__(self, model, image_size, timesteps=1000):
        super().__init__()
        self.model = model
        self.image_size = image_size
        betas = cosine_beta_schedule(timesteps)
        alphas = 1. - betas
        alphas_cumprod = torch.cumprod(alphas, dim=0)
        self.num_timesteps = int(betas.shape[0])
        register_buffer = lambda name, val: self.register_buffer(name, val.to(torch.float32))
        register_buffer('betas', betas)
        register_buffer('sqrt_alphas_cumprod', torch.sqrt(alphas_cumprod))
        register_buffer('sqrt_one_minus_alphas_cumprod', torch.sqrt(1. - alphas_cumprod))

    def q_sample(self, x_start, t, noise):
        return (extract(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start +
                extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise)

    def forward(self, img):
        b, c, h, w, device = *img.shape, img.device
        t = torch.randint(0, self.num_timesteps, (b,), device=device).long()
        noise = torch.randn_like(img)
        x = self.q_sample(img, t, noise)
        model_out = self.model(x, t)
        return F.mse_loss(model_out, noise)


@torch.no_grad()
def ema_update(ema_model, model, decay=0.9999):
    for ema_p, p in zip(ema_model.parameters(), model.parameters()):
        ema_p.lerp_(p, 1 - decay)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    use_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()

    model = Unet(dim=64, dim_mults=(1, 2, 4, 8))
    diffusion = GaussianDiffusion(model, image_size=128).to(device)
    ema = copy.deepcopy(diffusion).eval().requires_grad_(False)

    loader = DataLoader(ImageFolderDataset("images", 128), batch_size=32, shuffle=True,
                        num_workers=4, pin_memory=device.type == "cuda", drop_last=True)
    opt = torch.optim.Adam(diffusion.parameters(), lr=8e-5, betas=(0.9, 0.99))

    step = 0
    for epoch in range(100):
        for images in loader:
            images = images.to(device, non_blocking=True)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16):
                loss = diffusion(images)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(diffusion.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            ema_update(ema, diffusion)
            step += 1
            if step % 1000 == 0:
                torch.save({"model": diffusion.state_dict(), "ema": ema.state_dict(), "opt": opt.state_dict(),
                            "step": step}, f"model-{step // 1000}.pt")
                print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
