"""ViT fine-tuning on an A100 with bf16 autocast, keeping the GradScaler from an older fp16 script:
needless with bf16 (and the scaler's device is a literal)."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
import timm


def get_loaders(root, bs):
    mean, std = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)
    train_tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                   transforms.ToTensor(), transforms.Normalize(mean, std)])
    val_tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                                 transforms.ToTensor(), transforms.Normalize(mean, std)])
    train = DataLoader(datasets.ImageFolder(f"{root}/train", train_tf), batch_size=bs, shuffle=True,
                       num_workers=8, drop_last=True)
    val = DataLoader(datasets.ImageFolder(f"{root}/val", val_tf), batch_size=bs, num_workers=8)
    return train, val


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/datasets/food101")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--bs", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-5)
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader, val_loader = get_loaders(args.data, args.bs)
    model = timm.create_model("vit_base_patch16_224", pretrained=True, num_classes=101).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    total = args.epochs * len(train_loader)
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / total)))
    scaler = torch.amp.GradScaler("cuda")  # expect: DEV209 DEV101

    for epoch in range(args.epochs):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                logits = model(images)
                loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            sched.step()

        model.eval()
        correct = n = 0
        with torch.no_grad(), torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            for images, labels in val_loader:
                images, labels = images.to(device), labels.to(device)
                correct += (model(images).argmax(1) == labels).sum().item()
                n += labels.numel()
        print(f"epoch {epoch}: val acc {correct / n:.4f}")
        torch.save(model.state_dict(), f"vit_food101_{epoch}.pt")


if __name__ == "__main__":
    main()
