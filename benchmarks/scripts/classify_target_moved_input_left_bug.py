# Image classification with train()/validate() that receive the model, loader and device as
# parameters. train() moves only the labels before the forward pass (the input stays on the
# CPU while the model is on the GPU); validate() moves both and is correct.
import argparse
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class SmallConvNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def train(loader, model, criterion, optimizer, epoch, device, print_every=10):
    model.train()
    started = time.time()
    for step, (images, labels) in enumerate(loader):
        labels = labels.to(device, non_blocking=True)
        logits = model(images)  # expect: DEV111
        loss = criterion(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % print_every == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.3f} {time.time() - started:.1f}s")


@torch.no_grad()
def validate(loader, model, criterion, device):
    model.eval()
    correct = seen = 0
    total_loss = 0.0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        logits = model(images)
        total_loss += criterion(logits, labels).item() * labels.size(0)
        correct += (logits.argmax(1) == labels).sum().item()
        seen += labels.size(0)
    return total_loss / seen, correct / seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    images = torch.randn(256, 3, 32, 32)
    labels = torch.randint(0, 10, (256,))
    train_loader = DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True)
    val_loader = DataLoader(TensorDataset(images[:64], labels[:64]), batch_size=32)
    model = SmallConvNet().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(args.epochs):
        train(train_loader, model, criterion, optimizer, epoch, device)
        val_loss, val_acc = validate(val_loader, model, criterion, device)
        print(f"epoch {epoch}: val loss {val_loss:.3f} acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
