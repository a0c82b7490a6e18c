"""Gradient accumulation with a GradScaler and gradient clipping: the clip runs on scaled gradients
(no unscale_), so max_norm is compared with gradients 65536x too large."""
import math
import argparse

import torch
import torch.nn as nn
from torch.nn.utils import clip_grad_norm_
from torch.utils.data import DataLoader

from data import build_dataset
from models import build_model


def train(args):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model(args.arch).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    loader = DataLoader(build_dataset(args.data, train=True), batch_size=args.micro_batch, shuffle=True,
                        num_workers=8, pin_memory=torch.cuda.is_available(), drop_last=True)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    scaler = torch.amp.GradScaler("cuda", enabled=args.fp16)  # expect: DEV101
    steps_per_epoch = math.ceil(len(loader) / args.accum)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr,
                                                    total_steps=args.epochs * steps_per_epoch)

    for epoch in range(args.epochs):
        model.train()
        optimizer.zero_grad(set_to_none=True)
        for it, (images, labels) in enumerate(loader):
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=args.fp16):  # expect: DEV101
                logits = model(images)
                loss = criterion(logits, labels) / args.accum
            scaler.scale(loss).backward()

            if (it + 1) % args.accum == 0:
                clip_grad_norm_(model.parameters(), args.clip)  # expect: DEV205
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()

            if it % 100 == 0:
                print(f"epoch {epoch} it {it} loss {loss.item() * args.accum:.4f}")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scaler": scaler.state_dict(), "epoch": epoch}, f"ckpt_{epoch}.pth")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="resnet50")
    p.add_argument("--data", default="/data/imagenet")
    p.add_argument("--epochs", type=int, default=90)
    p.add_argument("--micro-batch", type=int, default=64)
    p.add_argument("--accum", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--fp16", action="store_true")
    train(p.parse_args())
