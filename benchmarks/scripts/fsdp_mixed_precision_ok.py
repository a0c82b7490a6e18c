"""An FSDP fine-tuning script launched with torchrun, written to also run on CPU with gloo:
bf16 MixedPrecision policy, ShardedGradScaler only for fp16, sampler epochs set."""
import argparse
import functools
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class MLP(nn.Module):
    def __init__(self, d=512, depth=6, classes=10):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(d, d), nn.GELU()) for _ in range(depth))
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return self.head(x)


def setup():
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    dist.init_process_group(backend)
    return device


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="bf16")
    args = parser.parse_args()
    device = setup()
    rank = dist.get_rank()

    dataset = TensorDataset(torch.randn(4096, 512), torch.randint(0, 10, (4096,)))
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler, pin_memory=device.type == "cuda")

    param_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    policy = MixedPrecision(param_dtype=param_dtype, reduce_dtype=param_dtype, buffer_dtype=param_dtype)
    model = FSDP(MLP(), auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=10_000),
                 mixed_precision=policy, device_id=device if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = ShardedGradScaler(enabled=args.dtype == "fp16")

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total = torch.zeros(2, device=device)
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            model.clip_grad_norm_(1.0)
            scaler.step(optimizer)
            scaler.update()
            total += torch.stack([loss.detach().float() * x.size(0), torch.tensor(x.size(0), device=device)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: loss {(total[0] / total[1]).item():.4f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
