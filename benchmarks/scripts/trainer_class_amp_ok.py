"""A class-based trainer in the ultralytics BaseTrainer mould: the scaler, optimizer and EMA live on
self, optimizer_step() unscales/clips/steps/updates, accumulation decides when to call it."""
import math
import time
from copy import deepcopy

import torch
import torch.nn as nn
from torch.utils.data import DataLoader


class ModelEMA:
    def __init__(self, model, decay=0.9999, tau=2000):
        self.ema = deepcopy(model).eval()
        self.updates = 0
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))
        for p in self.ema.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        self.updates += 1
        d = self.decay(self.updates)
        msd = model.state_dict()
        for k, v in self.ema.state_dict().items():
            if v.dtype.is_floating_point:
                v *= d
                v += (1 - d) * msd[k].detach()


class Trainer:
    def __init__(self, model, dataset, epochs=100, batch=16, nbs=64, lr0=0.01, amp=True, device=None):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.amp = amp and self.device.type == "cuda"
        self.model = model.to(self.device)
        self.epochs = epochs
        self.batch_size = batch
        self.accumulate = max(round(nbs / batch), 1)
        self.train_loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=8,
                                       pin_memory=self.device.type == "cuda", collate_fn=getattr(dataset, "collate_fn", None))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr0, momentum=0.937, nesterov=True)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda x: (1 - x / epochs) * 0.99 + 0.01)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.amp)
        self.ema = ModelEMA(self.model)
        self.loss = None

    def preprocess_batch(self, batch):
        batch["img"] = batch["img"].to(self.device, non_blocking=True).float() / 255
        for k in ("cls", "bboxes", "batch_idx"):
            batch[k] = batch[k].to(self.device)
        return batch

    def optimizer_step(self):
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()
        self.ema.update(self.model)

    def train(self):
        nb = len(self.train_loader)
        last_opt_step = -1
        for epoch in range(self.epochs):
            self.model.train()
            t0 = time.time()
            self.optimizer.zero_grad()
            for i, batch in enumerate(self.train_loader):
                ni = i + nb * epoch
                with torch.autocast(self.device.type, enabled=self.amp):
                    batch = self.preprocess_batch(batch)
                    self.loss, loss_items = self.model(batch)
                self.scaler.scale(self.loss).backward()
                if ni - last_opt_step >= self.accumulate:
                    self.optimizer_step()
                    last_opt_step = ni
            self.scheduler.step()
            print(f"epoch {epoch}: {time.time() - t0:.1f}s loss {self.loss.item():.4f}")
            torch.save({"epoch": epoch, "model": deepcopy(self.ema.ema).half(), "optimizer": self.optimizer.state_dict()},
                       "last.pt")
