# A contrastive trainer whose step method receives two views of a batch as parameters. It moves
# the anchors and passes the positives to the encoder as they came (on the CPU). The eval step
# moves both views and is correct.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Projector(nn.Module):
    def __init__(self, dim_in=32, dim_out=16):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim_in, 64), nn.ReLU(), nn.Linear(64, dim_out))

    def forward(self, x):
        return F.normalize(self.body(x), dim=-1)


def info_nce(a, b, temperature=0.1):
    logits = a @ b.t() / temperature
    labels = torch.arange(a.size(0), device=a.device)
    return F.cross_entropy(logits, labels)


class ContrastiveTrainer:
    def __init__(self, encoder, device):
        self.device = device
        self.encoder = encoder.to(device)
        self.optimizer = torch.optim.Adam(self.encoder.parameters(), lr=1e-3)

    def train_step(self, anchors, positives):
        anchors = anchors.to(self.device)
        za = self.encoder(anchors)
        zp = self.encoder(positives)  # expect: DEV111
        loss = info_nce(za, zp)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def eval_step(self, anchors, positives):
        anchors, positives = anchors.to(self.device), positives.to(self.device)
        return info_nce(self.encoder(anchors), self.encoder(positives)).item()


def augment(x):
    return x + 0.05 * torch.randn_like(x)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = torch.randn(512, 32)
    loader = DataLoader(TensorDataset(data), batch_size=64, shuffle=True)
    trainer = ContrastiveTrainer(Projector(), device)
    for epoch in range(2):
        losses = [trainer.train_step(augment(x), augment(x)) for (x,) in loader]
        print(epoch, sum(losses) / len(losses))
    print(trainer.eval_step(data[:64], augment(data[:64])))


if __name__ == "__main__":
    main()
