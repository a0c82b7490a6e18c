"""Training on a CPU-only server with bfloat16 autocast (Intel AMX): no GradScaler needed; one
helper still uses the deprecated torch.cpu.amp.autocast spelling."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class ConvNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def train(model, loader, epochs=5):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(epochs):
        t0 = time.time()
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f} ({time.time() - t0:.1f}s)")


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.cpu.amp.autocast():  # expect: DEV206
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(loader.dataset)


if __name__ == "__main__":
    torch.set_num_threads(16)
    data = TensorDataset(torch.randn(2048, 3, 32, 32), torch.randint(0, 10, (2048,)))
    loader = DataLoader(data, batch_size=128, shuffle=True)
    model = ConvNet().to(memory_format=torch.channels_last)
    train(model, loader)
    print("accuracy", evaluate(model, DataLoader(data, batch_size=512)))
    torch.save(model.state_dict(), "convnet_bf16.pt")
