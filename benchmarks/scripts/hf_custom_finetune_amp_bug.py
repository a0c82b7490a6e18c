"""A hand-written BERT fine-tuning script with AMP: the labels of the dict batch stay on the CPU,
scaler.update() was forgotten, and the demo at the end feeds tokenizer output unmoved."""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from transformers import AutoModel, AutoTokenizer, get_cosine_schedule_with_warmup


class ReviewDataset(Dataset):
    def __init__(self, texts, labels, tokenizer, max_len=256):
        self.texts = texts
        self.labels = labels
        self.tokenizer = tokenizer
        self.max_len = max_len

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, idx):
        enc = self.tokenizer(
            self.texts[idx],
            truncation=True,
            padding="max_length",
            max_length=self.max_len,
            return_tensors="pt",
        )
        return {
            "input_ids": enc["input_ids"].squeeze(0),
            "attention_mask": enc["attention_mask"].squeeze(0),
            "labels": torch.tensor(self.labels[idx], dtype=torch.long),
        }


class Classifier(nn.Module):
    def __init__(self, backbone, n_classes, dropout=0.1):
        super().__init__()
        self.backbone = AutoModel.from_pretrained(backbone)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(self.backbone.config.hidden_size, n_classes)

    def forward(self, input_ids, attention_mask):
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask)
        pooled = out.last_hidden_state[:, 0]
        return self.head(self.drop(pooled))


def train_one_epoch(model, loader, optimizer, scheduler, scaler, criterion, device):
    model.train()
    losses = []
    for batch in loader:
        input_ids = batch["input_ids"].to(device)
        attention_mask = batch["attention_mask"].to(device)
        labels = batch["labels"]

        optimizer.zero_grad()
        with torch.autocast(device_type=device.type, dtype=torch.float16):
            logits = model(input_ids, attention_mask)
            loss = criterion(logits, labels)  # expect: DEV111
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)  # expect: DEV204
        scheduler.step()
        losses.append(loss.item())
    return float(np.mean(losses))


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        logits = model(batch["input_ids"], batch["attention_mask"])
        correct += (logits.argmax(-1) == batch["labels"]).sum().item()
        total += batch["labels"].numel()
    return correct / total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="distilbert-base-uncased")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--bs", type=int, default=16)
    parser.add_argument("--out", default="checkpoints")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    texts = [l.strip() for l in open("reviews.txt")]
    labels = [int(l) for l in open("labels.txt")]
    split = int(0.9 * len(texts))
    train_ds = ReviewDataset(texts[:split], labels[:split], tokenizer)
    valid_ds = ReviewDataset(texts[split:], labels[split:], tokenizer)
    train_loader = DataLoader(train_ds, batch_size=args.bs, shuffle=True, num_workers=2)
    valid_loader = DataLoader(valid_ds, batch_size=args.bs * 2)

    model = Classifier(args.model, n_classes=2).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    steps = args.epochs * len(train_loader)
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(0.06 * steps), steps)
    scaler = torch.amp.GradScaler(enabled=device.type == "cuda")
    criterion = nn.CrossEntropyLoss()

    best = 0.0
    os.makedirs(args.out, exist_ok=True)
    for epoch in range(args.epochs):
        loss = train_one_epoch(model, train_loader, optimizer, scheduler, scaler, criterion, device)
        acc = evaluate(model, valid_loader, device)
        print(f"epoch {epoch}: loss {loss:.4f} acc {acc:.4f}")
        if acc > best:
            best = acc
            torch.save(model.state_dict(), os.path.join(args.out, "best.pt"))

    model.load_state_dict(torch.load(os.path.join(args.out, "best.pt"), map_location=device))
    model.eval()
    enc = tokenizer("An absolute delight from start to finish.", return_tensors="pt")
    with torch.no_grad():
        logits = model(enc["input_ids"], enc["attention_mask"])  # either: DEV111
    print(logits.softmax(-1).cpu().numpy())


if __name__ == "__main__":
    main()
