"""A from-scratch DDPM (the "diffusion models from scratch" blog style): the noise schedule is kept
as plain tensor attributes, and forward samples timesteps on the CPU."""
import math
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
from torchvision.utils import save_image


class SinusoidalPositionEmbeddings(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, time):
        device = time.device
        half_dim = self.dim // 2
        embeddings = math.log(10000) / (half_dim - 1)
        embeddings = torch.exp(torch.arange(half_dim, device=device) * -embeddings)
        embeddings = time[:, None] * embeddings[None, :]
        return torch.cat((embeddings.sin(), embeddings.cos()), dim=-1)


class TinyUNet(nn.Module):
    def __init__(self, ch=1, base=64, tdim=128):
        super().__init__()
        self.time_mlp = nn.Sequential(SinusoidalPositionEmbeddings(tdim), nn.Linear(tdim, base), nn.SiLU())
        self.down = nn.Conv2d(ch, base, 3, padding=1)
        self.mid = nn.Conv2d(base, base, 3, padding=1)
        self.up = nn.Conv2d(base, ch, 3, padding=1)

    def forward(self, x, t):
        h = F.silu(self.down(x))
        h = h + self.time_mlp(t)[:, :, None, None]
        h = F.silu(self.mid(h))
        return self.up(h)


class Diffusion(nn.Module):
    def __init__(self, model, timesteps=1000, beta_start=1e-4, beta_end=0.02):
        super().__init__()
        self.model = model
        self.T = timesteps
        self.betas = torch.linspace(beta_start, beta_end, timesteps)  # expect: DEV113

    def forward(self, x0):
        t = torch.randint(0, self.T, (x0.shape[0],))  # either: DEV112 (it meets only self.model, an opaque submodule)
        noise = torch.randn_like(x0)
        alpha_bar = torch.cumprod(1.0 - self.betas, dim=0)[t].view(-1, 1, 1, 1)
        xt = alpha_bar.sqrt() * x0 + (1 - alpha_bar).sqrt() * noise
        return F.mse_loss(self.model(xt, t), noise)

    @torch.no_grad()
    def sample(self, n, shape, device):
        x = torch.randn(n, *shape, device=device)
        for i in reversed(range(self.T)):
            t = torch.full((n,), i, device=device, dtype=torch.long)
            alphas_cumprod = torch.cumprod(1.0 - self.betas, dim=0)
            beta, ab = self.betas[i], alphas_cumprod[i]
            alpha = 1.0 - beta
            eps = self.model(x, t)
            mean = (x - beta / (1 - ab).sqrt() * eps) / alpha.sqrt()
            x = mean + (beta.sqrt() * torch.randn_like(x) if i > 0 else 0)
        return x


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--bs", type=int, default=128)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tf = transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda x: x * 2 - 1)])
    loader = DataLoader(datasets.MNIST("data", download=True, transform=tf), batch_size=args.bs, shuffle=True)

    diffusion = Diffusion(TinyUNet()).to(device)
    opt = torch.optim.Adam(diffusion.parameters(), lr=2e-4)
    for epoch in range(args.epochs):
        for x, _ in loader:
            x = x.to(device)
            loss = diffusion(x)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")
        imgs = diffusion.sample(16, (1, 28, 28), device)
        save_image((imgs.clamp(-1, 1) + 1) / 2, f"sample_{epoch}.png", nrow=4)


if __name__ == "__main__":
    main()
