"""The AMP examples page, "Working with Multiple Models, Losses, and Optimizers", written out as a
script: one scaler, two optimizers, unscale_ on one of them before its clip, one update."""
import torch
import torch.nn as nn
from torch.amp import GradScaler, autocast

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16

model0 = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
model1 = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
optimizer0 = torch.optim.SGD(model0.parameters(), lr=0.01)
optimizer1 = torch.optim.Adam(model1.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()

data = [(torch.randn(32, 64, device=device), torch.randint(0, 10, (32,), device=device)) for _ in range(20)]

scaler = GradScaler(device.type, enabled=amp_dtype == torch.float16)

for epoch in range(3):
    for input, target in data:
        optimizer0.zero_grad()
        optimizer1.zero_grad()
        with autocast(device_type=device.type, dtype=amp_dtype):
            output0 = model0(input)
            output1 = model1(input)
            loss0 = loss_fn(2 * output0 + 3 * output1, target)
            loss1 = loss_fn(3 * output0 - 5 * output1, target)

        # (retain_graph here is unrelated to amp, it's present because in this
        # example, both backward() calls share some sections of graph.)
        scaler.scale(loss0).backward(retain_graph=True)
        scaler.scale(loss1).backward()

        # You can choose which optimizers receive explicit unscaling, if you
        # want to inspect or modify the gradients of the params they own.
        scaler.unscale_(optimizer0)
        torch.nn.utils.clip_grad_norm_(model0.parameters(), max_norm=1.0)

        scaler.step(optimizer0)
        scaler.step(optimizer1)

        scaler.update()
    print(f"epoch {epoch}: loss0 {loss0.item():.3f} loss1 {loss1.item():.3f}")
