# A training loop that iterates through a metric logger's log_every() generator, which yields
# the loader's batches unchanged while printing timings. The images are moved, the labels are
# not, and the criterion gets them on the CPU.
import datetime
import time
from collections import defaultdict

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Meter:
    def __init__(self):
        self.total, self.count = 0.0, 0

    def update(self, value, n=1):
        self.total += value * n
        self.count += n

    @property
    def avg(self):
        return self.total / max(self.count, 1)


class MetricLogger:
    def __init__(self):
        self.meters = defaultdict(Meter)

    def update(self, **values):
        for name, value in values.items():
            self.meters[name].update(value)

    def log_every(self, iterable, every, header):
        start = time.time()
        for i, item in enumerate(iterable):
            yield item
            if i % every == 0:
                took = datetime.timedelta(seconds=int(time.time() - start))
                text = "  ".join(f"{k} {m.avg:.4f}" for k, m in self.meters.items())
                print(f"{header} [{i}] {text} ({took})")


def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch):
    model.train()
    metric_logger = MetricLogger()
    for image, target in metric_logger.log_every(data_loader, 10, f"Epoch [{epoch}]"):
        image = image.to(device, non_blocking=True)
        output = model(image)
        loss = criterion(output, target)  # expect: DEV111
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        metric_logger.update(loss=loss.item())


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(320, 20), torch.randint(0, 4, (320,)))
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(3):
        train_one_epoch(model, criterion, optimizer, loader, device, epoch)


if __name__ == "__main__":
    main()
