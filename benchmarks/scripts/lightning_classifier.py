"""A LightningModule image classifier with a tensor attribute read in forward (a bug Lightning does
not save you from: the module moves, the plain attribute does not) and a plain list of heads."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning.pytorch as pl
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class LitClassifier(pl.LightningModule):
    def __init__(self, num_classes=10, lr=1e-3, label_smoothing=0.1):
        super().__init__()
        self.save_hyperparameters()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.heads = [nn.Linear(64, num_classes) for _ in range(2)]  # expect: DEV114
        self.mean = torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1)  # expect: DEV113
        self.std = torch.tensor([0.2470, 0.2435, 0.2616]).view(1, 3, 1, 1)  # expect: DEV113

    def forward(self, x):
        x = (x - self.mean) / self.std
        feats = self.backbone(x)
        return sum(head(feats) for head in self.heads) / len(self.heads)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y, label_smoothing=self.hparams.label_smoothing)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        acc = (logits.argmax(1) == y).float().mean()
        self.log_dict({"val_loss": F.cross_entropy(logits, y), "val_acc": acc}, prog_bar=True)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.hparams.lr,
                                                    total_steps=self.trainer.estimated_stepping_batches)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


if __name__ == "__main__":
    tf = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor()])
    train = DataLoader(datasets.CIFAR10("data", train=True, download=True, transform=tf),
                       batch_size=128, shuffle=True, num_workers=4)
    val = DataLoader(datasets.CIFAR10("data", train=False, transform=transforms.ToTensor()), batch_size=256)
    trainer = pl.Trainer(max_epochs=30, accelerator="auto", devices="auto", precision="bf16-mixed")
    trainer.fit(LitClassifier(), train, val)
