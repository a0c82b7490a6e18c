"""A hand-written accelerate loop (the accelerate docs' "migration" example): fp16 via
Accelerator(mixed_precision=...), accelerator.autocast/backward/clip_grad_norm_, no manual moves (DEV106
still applies: pin_memory=True is the DataLoader's own argument, not accelerate's)."""
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms


def main():
    accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=2)
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    train_ds = datasets.ImageFolder("data/train", tf)
    eval_ds = datasets.ImageFolder("data/val", tf)
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)  # expect: DEV106
    eval_loader = DataLoader(eval_ds, batch_size=128, num_workers=4)

    model = models.resnet18(num_classes=len(train_ds.classes))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-4, total_steps=10 * len(train_loader))
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, scheduler
    )

    for epoch in range(10):
        model.train()
        for images, labels in train_loader:
            with accelerator.accumulate(model):
                with accelerator.autocast():
                    loss = F.cross_entropy(model(images), labels)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()

        model.eval()
        correct = total = 0
        for images, labels in eval_loader:
            with torch.no_grad():
                preds = model(images).argmax(dim=1)
            preds, labels = accelerator.gather_for_metrics((preds, labels))
            correct += (preds == labels).sum().item()
            total += labels.numel()
        accelerator.print(f"epoch {epoch}: acc {correct / total:.4f}")

    accelerator.wait_for_everyone()
    accelerator.save(accelerator.unwrap_model(model).state_dict(), "resnet18.pt")


if __name__ == "__main__":
    main()
