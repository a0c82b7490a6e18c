# Kaggle-style train_fn/valid_fn helpers (tabular MLP, 5 folds): valid_fn forgets to move the
# batch, and every call site passes a moved model and a DataLoader.
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from sklearn.model_selection import KFold
from sklearn.metrics import roc_auc_score
from torch.utils.data import DataLoader, Dataset

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
EPOCHS = 20
BATCH_SIZE = 256


class TabularDataset(Dataset):
    def __init__(self, features, targets):
        self.features = features
        self.targets = targets

    def __len__(self):
        return len(self.features)

    def __getitem__(self, idx):
        return {
            "x": torch.tensor(self.features[idx, :], dtype=torch.float),
            "y": torch.tensor(self.targets[idx, :], dtype=torch.float),
        }


class Model(nn.Module):
    def __init__(self, num_features, num_targets, hidden_size=512):
        super().__init__()
        self.net = nn.Sequential(
            nn.BatchNorm1d(num_features), nn.Dropout(0.2), nn.Linear(num_features, hidden_size), nn.ReLU(),
            nn.BatchNorm1d(hidden_size), nn.Dropout(0.3), nn.Linear(hidden_size, num_targets),
        )

    def forward(self, x):
        return self.net(x)


def train_fn(model, optimizer, scheduler, loss_fn, dataloader, device):
    model.train()
    final_loss = 0
    for data in dataloader:
        optimizer.zero_grad()
        inputs, targets = data["x"].to(device), data["y"].to(device)
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
        loss.backward()
        optimizer.step()
        scheduler.step()
        final_loss += loss.item()
    return final_loss / len(dataloader)


def valid_fn(model, loss_fn, dataloader, device):
    model.eval()
    final_loss = 0
    valid_preds = []
    for data in dataloader:
        inputs, targets = data["x"], data["y"]
        outputs = model(inputs)  # expect: DEV111
        loss = loss_fn(outputs, targets)  # either: DEV111
        final_loss += loss.item()
        valid_preds.append(outputs.sigmoid().detach().cpu().numpy())
    return final_loss / len(dataloader), np.concatenate(valid_preds)


def run_training(fold, train_df, feature_cols, target_cols):
    trn_idx, val_idx = fold
    x_train, y_train = train_df.loc[trn_idx, feature_cols].values, train_df.loc[trn_idx, target_cols].values
    x_valid, y_valid = train_df.loc[val_idx, feature_cols].values, train_df.loc[val_idx, target_cols].values
    trainloader = DataLoader(TabularDataset(x_train, y_train), batch_size=BATCH_SIZE, shuffle=True)
    validloader = DataLoader(TabularDataset(x_valid, y_valid), batch_size=BATCH_SIZE, shuffle=False)

    model = Model(len(feature_cols), len(target_cols))
    model.to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, pct_start=0.1, div_factor=1e3, max_lr=1e-2,
                                                    epochs=EPOCHS, steps_per_epoch=len(trainloader))
    loss_fn = nn.BCEWithLogitsLoss()
    best_loss = np.inf
    oof = np.zeros((len(val_idx), len(target_cols)))
    for epoch in range(EPOCHS):
        train_loss = train_fn(model, optimizer, scheduler, loss_fn, trainloader, DEVICE)
        valid_loss, valid_preds = valid_fn(model, loss_fn, validloader, DEVICE)
        if valid_loss < best_loss:
            best_loss = valid_loss
            oof = valid_preds
            torch.save(model.state_dict(), f"FOLD{fold}_.pth")
        print(f"epoch {epoch} train {train_loss:.5f} valid {valid_loss:.5f}")
    return oof, roc_auc_score(y_valid, oof)


if __name__ == "__main__":
    train = pd.read_csv("../input/train.csv")
    targets = [c for c in train.columns if c.startswith("target_")]
    features = [c for c in train.columns if c not in targets + ["id"]]
    for i, fold in enumerate(KFold(n_splits=5, shuffle=True, random_state=42).split(train)):
        _, auc = run_training(fold, train, features, targets)
        print(f"fold {i}: auc {auc:.4f}")
