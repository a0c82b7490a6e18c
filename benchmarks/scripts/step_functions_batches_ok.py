# Correct step functions in the shapes the DEV111 checks read (clean): a dict batch parameter
# moved item by item, a match statement over the batch, lengths kept on the CPU for
# pack_padded_sequence, and a prediction aligned onto the target's device.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import DataLoader


class Tagger(nn.Module):
    def __init__(self, vocab=100, width=32, tags=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.rnn = nn.LSTM(width, width, batch_first=True)
        self.out = nn.Linear(width, tags)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.embed(tokens), lengths, batch_first=True, enforce_sorted=False)
        _, (hidden, _) = self.rnn(packed)
        return self.out(hidden[-1])


def dict_step(model, batch, device):
    tokens = batch["tokens"].to(device)
    tags = batch["tags"].to(device)
    logits = model(tokens, batch["lengths"])
    return F.cross_entropy(logits, tags)


def matched_step(model, batch, device):
    match batch:
        case {"tokens": tokens, "tags": tags, "lengths": lengths}:
            tokens, tags = tokens.to(device), tags.to(device)
            return F.cross_entropy(model(tokens, lengths), tags)
        case (tokens, tags, lengths):
            return F.cross_entropy(model(tokens.to(device), lengths), tags.to(device))


def aligned_loss(pred, target):
    pred = pred.to(target.device)
    return F.mse_loss(pred, target)


def collate(rows):
    width = max(len(r[0]) for r in rows)
    tokens = torch.zeros(len(rows), width, dtype=torch.long)
    for i, (seq, _) in enumerate(rows):
        tokens[i, :len(seq)] = torch.tensor(seq)
    return {
        "tokens": tokens,
        "tags": torch.tensor([tag for _, tag in rows]),
        "lengths": torch.tensor([len(seq) for seq, _ in rows]),
    }


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = [([(i * j) % 99 + 1 for j in range(1 + i % 7)], i % 5) for i in range(200)]
    loader = DataLoader(rows, batch_size=16, collate_fn=collate)
    model = Tagger().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for batch in loader:
            loss = dict_step(model, batch, device) if epoch == 0 else matched_step(model, batch, device)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print(aligned_loss(torch.zeros(3), torch.ones(3)).item())


if __name__ == "__main__":
    main()
