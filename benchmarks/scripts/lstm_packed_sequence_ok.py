"""A sentiment LSTM over padded batches (pad_sequence + pack_padded_sequence). The lengths stay on
the CPU on purpose: pack_padded_sequence requires a CPU int64 lengths tensor."""
import argparse
import random

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence, pack_padded_sequence, pad_packed_sequence
from torch.utils.data import DataLoader, Dataset


class TextDataset(Dataset):
    def __init__(self, path, vocab):
        self.items = []
        for line in open(path):
            label, text = line.rstrip("\n").split("\t", 1)
            ids = [vocab.get(tok, 1) for tok in text.lower().split()]
            self.items.append((torch.tensor(ids, dtype=torch.long), int(label)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate_batch(batch):
    seqs, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    padded = pad_sequence(seqs, batch_first=True, padding_value=0)
    return padded, lengths, torch.tensor(labels, dtype=torch.float)


class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim=128, hidden=256, layers=2, dropout=0.3, bidirectional=True):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.lstm = nn.LSTM(embed_dim, hidden, num_layers=layers, bidirectional=bidirectional,
                            dropout=dropout, batch_first=True)
        self.fc = nn.Linear(hidden * 2 if bidirectional else hidden, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, text, text_lengths):
        embedded = self.dropout(self.embedding(text))
        packed_embedded = pack_padded_sequence(embedded, text_lengths.cpu(), batch_first=True,
                                               enforce_sorted=False)
        packed_output, (hidden, cell) = self.lstm(packed_embedded)
        output, output_lengths = pad_packed_sequence(packed_output, batch_first=True)
        hidden = self.dropout(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1))
        return self.fc(hidden).squeeze(1)


def binary_accuracy(preds, y):
    rounded_preds = torch.round(torch.sigmoid(preds))
    correct = (rounded_preds == y).float()
    return correct.sum() / len(correct)


def train(model, loader, optimizer, criterion, device):
    epoch_loss = epoch_acc = 0
    model.train()
    for text, text_lengths, labels in loader:
        text, labels = text.to(device), labels.to(device)
        optimizer.zero_grad()
        predictions = model(text, text_lengths)
        loss = criterion(predictions, labels)
        acc = binary_accuracy(predictions, labels)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        epoch_loss += loss.item()
        epoch_acc += acc.item()
    return epoch_loss / len(loader), epoch_acc / len(loader)


def evaluate(model, loader, criterion, device):
    epoch_loss = epoch_acc = 0
    model.eval()
    with torch.no_grad():
        for text, text_lengths, labels in loader:
            text = text.to(device)
            labels = labels.to(device)
            predictions = model(text, text_lengths)
            loss = criterion(predictions, labels)
            epoch_loss += loss.item()
            epoch_acc += binary_accuracy(predictions, labels).item()
    return epoch_loss / len(loader), epoch_acc / len(loader)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train", default="train.tsv")
    parser.add_argument("--valid", default="valid.tsv")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()

    random.seed(1234)
    torch.manual_seed(1234)
    vocab = {"<pad>": 0, "<unk>": 1}
    for line in open(args.train):
        for tok in line.rstrip("\n").split("\t", 1)[1].lower().split():
            vocab.setdefault(tok, len(vocab))

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = DataLoader(TextDataset(args.train, vocab), batch_size=64, shuffle=True, collate_fn=collate_batch)
    valid_loader = DataLoader(TextDataset(args.valid, vocab), batch_size=64, collate_fn=collate_batch)

    model = LSTMClassifier(len(vocab)).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    criterion = nn.BCEWithLogitsLoss().to(device)

    best_valid_loss = float("inf")
    for epoch in range(args.epochs):
        train_loss, train_acc = train(model, train_loader, optimizer, criterion, device)
        valid_loss, valid_acc = evaluate(model, valid_loader, criterion, device)
        if valid_loss < best_valid_loss:
            best_valid_loss = valid_loss
            torch.save(model.state_dict(), "lstm-model.pt")
        print(f"Epoch {epoch + 1:02} | Train Loss {train_loss:.3f} Acc {train_acc * 100:.2f}% | "
              f"Val Loss {valid_loss:.3f} Acc {valid_acc * 100:.2f}%")


if __name__ == "__main__":
    main()
