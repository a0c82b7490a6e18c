# A toy translation model trained from a hand-written batcher with next_batch(), the way
# char-level and seq2seq scripts often skip DataLoader. The source ids are moved, the target
# ids are not, and the loss receives them on the CPU.
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = 0


class Batcher:
    """Pairs of random token sequences, handed out one padded batch at a time."""

    def __init__(self, pairs, batch_size):
        self.pairs, self.batch_size, self.cursor = pairs, batch_size, 0

    def next_batch(self):
        if self.cursor + self.batch_size > len(self.pairs):
            random.shuffle(self.pairs)
            self.cursor = 0
        chunk = self.pairs[self.cursor:self.cursor + self.batch_size]
        self.cursor += self.batch_size
        width = max(max(len(s), len(t)) for s, t in chunk)
        src = torch.full((len(chunk), width), PAD, dtype=torch.long)
        tgt = torch.full((len(chunk), width), PAD, dtype=torch.long)
        for row, (s, t) in enumerate(chunk):
            src[row, :len(s)] = torch.tensor(s)
            tgt[row, :len(t)] = torch.tensor(t)
        return src, tgt


class TinyTranslator(nn.Module):
    def __init__(self, vocab, width=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, width, padding_idx=PAD)
        self.encoder = nn.GRU(width, width, batch_first=True)
        self.out = nn.Linear(width, vocab)

    def forward(self, src):
        hidden, _ = self.encoder(self.embed(src))
        return self.out(hidden)


def run(model, batcher, optimizer, device, steps):
    model.train()
    for step in range(steps):
        src, tgt = batcher.next_batch()
        src = src.to(device)
        logits = model(src)
        loss = F.cross_entropy(logits.transpose(1, 2), tgt, ignore_index=PAD)  # expect: DEV111
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.3f} ppl {math.exp(min(loss.item(), 20)):.1f}")


def main():
    vocab = 40
    pairs = [([random.randrange(1, vocab) for _ in range(random.randint(3, 12))],) * 2 for _ in range(500)]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = TinyTranslator(vocab).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    run(model, Batcher(pairs, 16), optimizer, device, steps=200)


if __name__ == "__main__":
    main()
