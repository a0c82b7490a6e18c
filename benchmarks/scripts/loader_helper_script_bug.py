# A flat regression script whose DataLoaders come from a helper function of the same file. The
# training loop moves both tensors; the final evaluation loop forgets the inputs.
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

SEED = 7
torch.manual_seed(SEED)
np.random.seed(SEED)


def synthetic(n, dim=12):
    x = np.random.randn(n, dim).astype("float32")
    w = np.linspace(-1, 1, dim).astype("float32")
    y = x @ w + 0.1 * np.random.randn(n).astype("float32")
    return torch.from_numpy(x), torch.from_numpy(y).unsqueeze(1)


def make_loader(n, batch_size, shuffle):
    x, y = synthetic(n)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = nn.MSELoss()

train_loader = make_loader(1024, 64, shuffle=True)
test_loader = make_loader(256, 64, shuffle=False)

for epoch in range(5):
    running = 0.0
    for xb, yb in train_loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = loss_fn(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
    print(f"epoch {epoch}: {running / len(train_loader):.4f}")

model.eval()
errors = []
with torch.no_grad():
    for xb, yb in test_loader:
        pred = model(xb)  # expect: DEV111
        errors.append((pred.cpu() - yb).abs().mean().item())
print("test MAE", sum(errors) / len(errors))
