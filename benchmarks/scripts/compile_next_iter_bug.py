"""A quick experiment script: the model is moved and compiled, a sanity batch comes from
next(iter(loader)) and the main loop forgot the moves altogether."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
train_loader = DataLoader(datasets.FashionMNIST("data", train=True, download=True, transform=tf),
                          batch_size=256, shuffle=True, num_workers=4)

model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 10),
).to(device)
model = torch.compile(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

images, labels = next(iter(train_loader))
print("sanity:", model(images.to(device)).shape, labels[:8].tolist())

for epoch in range(10):
    t0 = time.time()
    for images, labels in train_loader:
        logits = model(images)  # expect: DEV111
        loss = F.cross_entropy(logits, labels)  # either: DEV111
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f} ({time.time() - t0:.1f}s)")

torch.save(model.state_dict(), "fashion_cnn.pt")

test_loader = DataLoader(datasets.FashionMNIST("data", train=False, transform=tf), batch_size=1024)
model.eval()
correct = 0
with torch.no_grad():
    for images, labels in test_loader:
        images, labels = images.to(device), labels.to(device)
        correct += (model(images).argmax(1) == labels).sum().item()
print(f"test accuracy {correct / len(test_loader.dataset):.4f}")
