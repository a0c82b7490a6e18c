"""An old "fp16 training" script: the model itself is cast to half and trained, with no master weights,
plus an inference helper where .half() is fine."""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import torchvision.transforms as transforms


def build_loaders(bs):
    tf = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize((0.4914, 0.4822, 0.4465),
                                                                         (0.2023, 0.1994, 0.2010))])
    train = torchvision.datasets.CIFAR10(root="./data", train=True, download=True, transform=tf)
    test = torchvision.datasets.CIFAR10(root="./data", train=False, download=True,
                                        transform=transforms.ToTensor())
    return (torch.utils.data.DataLoader(train, batch_size=bs, shuffle=True, num_workers=4),
            torch.utils.data.DataLoader(test, batch_size=256, shuffle=False, num_workers=4))


def train(args):
    train_loader, test_loader = build_loaders(args.batch_size)
    net = torchvision.models.resnet18(num_classes=10)
    net = net.cuda().half()  # expect: DEV102 DEV208
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.float()
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    for epoch in range(args.epochs):
        net.train()
        start = time.time()
        for inputs, targets in train_loader:
            inputs, targets = inputs.cuda().half(), targets.cuda()  # expect: DEV102
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = F.cross_entropy(outputs.float(), targets)
            loss.backward()
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch} loss {loss.item():.3f} {time.time() - start:.1f}s")
    torch.save(net.state_dict(), "resnet18_fp16.pth")


@torch.no_grad()
def benchmark_inference(path, device):
    net = torchvision.models.resnet18(num_classes=10)
    net.load_state_dict(torch.load(path, map_location="cpu"))
    net = net.to(device).half().eval()
    x = torch.randn(256, 3, 32, 32, device=device, dtype=torch.half)
    for _ in range(10):
        net(x)
    t0 = time.time()
    for _ in range(100):
        net(x)
    if device.type == "cuda":
        torch.cuda.synchronize()
    print(f"{(time.time() - t0) * 10:.2f} ms/batch")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    train(args)
    benchmark_inference("resnet18_fp16.pth", torch.device("cuda" if torch.cuda.is_available() else "cpu"))
