# Kaggle notebook export: text classification where the collate_fn (and, in the second variant,
# the Dataset itself) already puts every batch on the device, so the loop feeds it directly.
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
MAX_LEN = 64


class Vocab:
    def __init__(self, texts):
        words = sorted({w for t in texts for w in t.lower().split()})
        self.stoi = {w: i + 2 for i, w in enumerate(words)}

    def encode(self, text):
        return [self.stoi.get(w, 1) for w in text.lower().split()][:MAX_LEN]


class TextDataset(Dataset):
    def __init__(self, df, vocab):
        self.texts = df.text.values
        self.labels = df.target.values
        self.vocab = vocab

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        return self.vocab.encode(self.texts[i]), self.labels[i]


def collate_fn(batch):
    ids, labels = zip(*batch)
    x = torch.zeros(len(ids), MAX_LEN, dtype=torch.long)
    for i, seq in enumerate(ids):
        x[i, :len(seq)] = torch.tensor(seq)
    return x.to(device), torch.tensor(labels, dtype=torch.float).to(device)


class DeviceDataset(Dataset):
    """Second variant: the Dataset returns device tensors (num_workers=0)."""

    def __init__(self, features, targets):
        self.features = features
        self.targets = targets

    def __len__(self):
        return len(self.features)

    def __getitem__(self, i):
        x = torch.tensor(self.features[i], dtype=torch.float32).to(device)
        y = torch.tensor(self.targets[i], dtype=torch.float32).to(device)
        return x, y


class BagOfEmbeddings(nn.Module):
    def __init__(self, vocab_size, dim=64):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.fc = nn.Linear(dim, 1)

    def forward(self, x):
        return self.fc(self.emb(x)).squeeze(1)


if __name__ == "__main__":
    df = pd.read_csv("../input/nlp-getting-started/train.csv")
    vocab = Vocab(df.text.values)
    loader = DataLoader(TextDataset(df, vocab), batch_size=64, shuffle=True, collate_fn=collate_fn)
    model = BagOfEmbeddings(len(vocab.stoi) + 2).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(5):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        print(epoch, loss.item())

    feats = np.random.randn(1000, 16).astype(np.float32)
    targs = np.random.randn(1000).astype(np.float32)
    reg = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    opt2 = torch.optim.SGD(reg.parameters(), lr=0.01)
    for x, y in DataLoader(DeviceDataset(feats, targs), batch_size=32, shuffle=True):
        opt2.zero_grad()
        loss = nn.functional.mse_loss(reg(x).squeeze(1), y)
        loss.backward()
        opt2.step()
