"""A ViT written from scratch for CIFAR-10: positional embeddings and the CLS token are
parameters, but forward builds its token-dropout keep mask on the CPU."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class PatchEmbed(nn.Module):
    def __init__(self, img=32, patch=4, dim=256):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, stride=patch)
        self.n = (img // patch) ** 2

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class ViT(nn.Module):
    def __init__(self, dim=256, depth=6, heads=8, classes=10, token_drop=0.1):
        super().__init__()
        self.patch = PatchEmbed(dim=dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, self.patch.n + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim * 4, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)
        self.token_drop = token_drop

    def forward(self, x):
        tokens = self.patch(x)
        b, n, _ = tokens.shape
        if self.training and self.token_drop > 0:
            keep = torch.rand(b, n) > self.token_drop  # expect: DEV112
            tokens = tokens * keep.unsqueeze(-1)
        cls = self.cls_token.expand(b, -1, -1)
        tokens = torch.cat([cls, tokens], dim=1) + self.pos_embed
        idx = torch.arange(n + 1)
        tokens = tokens[:, idx]
        return self.head(self.norm(self.encoder(tokens))[:, 0])


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tf = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    loader = DataLoader(datasets.CIFAR10("data", train=True, download=True, transform=tf), batch_size=128,
                        shuffle=True, num_workers=4)
    model = ViT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    for epoch in range(100):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(epoch, loss.item())


if __name__ == "__main__":
    main()
