"""A resumable classification trainer: the checkpoint is restored into the model and optimizer on
the CPU, and only then is the model moved, so Adam's exp_avg tensors stay on the CPU."""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data/flowers")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--resume", default="")
    p.add_argument("--lr", type=float, default=3e-4)
    return p.parse_args()


def main():
    args = get_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    ds = datasets.ImageFolder(os.path.join(args.data, "train"), tf)
    loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=4,
                        pin_memory=torch.cuda.is_available())

    model = models.resnet50(num_classes=len(ds.classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    start_epoch = 0
    if args.resume:
        ckpt = torch.load(args.resume, map_location="cpu")
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        start_epoch = ckpt["epoch"] + 1
    model = model.to(device)  # expect: DEV116

    for epoch in range(start_epoch, args.epochs):
        model.train()
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "epoch": epoch}, "last.pth")


def finetune_head(args):
    """The correct order: move first, then build and restore the optimizer."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = models.resnet50(num_classes=102).to(device)
    optimizer = torch.optim.SGD(model.fc.parameters(), lr=0.01, momentum=0.9)
    if args.resume:
        ckpt = torch.load(args.resume, map_location=device)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
    return model, optimizer


if __name__ == "__main__":
    main()
