"""A DDP script whose epoch loop calls a helper that sets the sampler's epoch itself, and a
validation loader with a non-shuffling DistributedSampler that needs no set_epoch."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms

local_rank = int(os.environ.get("LOCAL_RANK", 0))
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}")
else:
    device = torch.device("cpu")
dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")

tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
train_ds = datasets.MNIST("data", train=True, download=local_rank == 0, transform=tf)
val_ds = datasets.MNIST("data", train=False, transform=tf)
train_sampler = DistributedSampler(train_ds)
val_sampler = DistributedSampler(val_ds, shuffle=False)
train_loader = DataLoader(train_ds, batch_size=64, sampler=train_sampler, num_workers=2)
val_loader = DataLoader(val_ds, batch_size=256, sampler=val_sampler)

model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


def train_one_epoch(epoch):
    train_sampler.set_epoch(epoch)
    model.train()
    for x, y in train_loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


@torch.no_grad()
def evaluate():
    model.eval()
    correct = torch.zeros(2, device=device)
    for x, y in val_loader:
        x, y = x.to(device), y.to(device)
        correct += torch.stack([(model(x).argmax(1) == y).sum(), torch.tensor(len(y), device=device)])
    dist.all_reduce(correct)
    return (correct[0] / correct[1]).item()


for epoch in range(10):
    train_one_epoch(epoch)
    acc = evaluate()
    for x, y in val_loader:
        pass  # warm the workers for the next epoch's evaluation
    if dist.get_rank() == 0:
        print(f"epoch {epoch}: acc {acc:.4f}")
        torch.save(model.module.state_dict(), "mnist_ddp.pt")
dist.destroy_process_group()
