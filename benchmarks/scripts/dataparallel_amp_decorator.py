"""The AMP docs' "DataParallel in a single process" pattern: autocast as a decorator on forward
(the old torch.cuda.amp spelling), GradScaler in the loop; nn.DataParallel scatters CPU inputs."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import autocast, GradScaler  # expect: DEV206


class MyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 64, 3, padding=1)
        self.fc = nn.Linear(64, 10)

    @autocast()  # expect: DEV206
    def forward(self, input):
        x = F.relu(self.conv(input))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def main(loader, epochs=10):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = MyModel()
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = GradScaler(enabled=device.type == "cuda")  # expect: DEV206
    for epoch in range(epochs):
        for input, target in loader:
            input, target = input.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(input)
            loss = F.cross_entropy(output.float(), target)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        print(epoch, loss.item())


if __name__ == "__main__":
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.randn(512, 3, 32, 32), torch.randint(0, 10, (512,)))
    main(DataLoader(data, batch_size=64, shuffle=True))
