"""Gradient accumulation with a GradScaler where the optimizer step inside the accumulation
condition was written as a plain optimizer.step(): the scaled gradients are applied as they are."""
import math

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms


def train(epochs=10, accum=8, lr=0.1):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tf = transforms.Compose([transforms.RandomResizedCrop(160), transforms.RandomHorizontalFlip(), transforms.ToTensor()])
    loader = DataLoader(datasets.ImageFolder("data/imagenette/train", tf), batch_size=32, shuffle=True,
                        num_workers=8, pin_memory=torch.cuda.is_available(), drop_last=True)
    model = models.resnet34(num_classes=10).to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-5, nesterov=True)
    steps = epochs * math.ceil(len(loader) / accum)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps)
    scaler = torch.amp.GradScaler(device.type)

    for epoch in range(epochs):
        model.train()
        for i, (images, targets) in enumerate(loader):
            images = images.to(device, non_blocking=True, memory_format=torch.channels_last)
            targets = targets.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.float16, enabled=device.type == "cuda"):
                loss = F.cross_entropy(model(images), targets, label_smoothing=0.1) / accum
            scaler.scale(loss).backward()
            if (i + 1) % accum == 0:
                optimizer.step()  # expect: DEV203
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
        print(f"epoch {epoch} loss {loss.item() * accum:.3f} lr {scheduler.get_last_lr()[0]:.4f}")
    torch.save(model.state_dict(), "resnet34_imagenette.pth")


if __name__ == "__main__":
    train()
