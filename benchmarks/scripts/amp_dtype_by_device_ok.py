"""One loop for every machine: fp16 + GradScaler on CUDA, bf16 autocast on the CPU, the scaler
enabled only for fp16, accumulation with unscale_/clip/step/update under one condition."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

use_cuda = torch.cuda.is_available()
device = torch.device("cuda" if use_cuda else "cpu")
amp_dtype = torch.float16 if use_cuda else torch.bfloat16


class Net(nn.Module):
    def __init__(self, d_in=32, d_hidden=256, classes=4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, d_hidden), nn.GELU(), nn.Linear(d_hidden, d_hidden), nn.GELU())
        self.head = nn.Linear(d_hidden, classes)

    def forward(self, x):
        return self.head(self.body(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    data = TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,)))
    loader = DataLoader(data, batch_size=64, shuffle=True, pin_memory=use_cuda)
    model = Net().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)

    for epoch in range(args.epochs):
        for i, (x, y) in enumerate(loader):
            x, y = [t.to(device, non_blocking=True) for t in (x, y)]
            with torch.autocast(device_type="cuda" if use_cuda else "cpu", dtype=amp_dtype):
                loss = F.cross_entropy(model(x), y) / args.accum
            scaler.scale(loss).backward()
            if (i + 1) % args.accum == 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
        print(f"epoch {epoch}: loss {loss.item() * args.accum:.4f} scale {scaler.get_scale():.0f}")

    model.eval()
    with torch.no_grad(), torch.autocast(device_type=device.type, dtype=amp_dtype):
        x, y = next(iter(DataLoader(data, batch_size=1024)))
        acc = (model(x.to(device)).argmax(1) == y.to(device)).float().mean().item()
    print(f"train accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
