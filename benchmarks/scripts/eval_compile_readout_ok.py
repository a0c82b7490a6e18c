"""An evaluation script: checkpoint loaded with map_location, torch.compile, inference_mode,
every result read out on the CPU (numpy, lists, metrics, plots), the model offloaded at the end."""
import argparse

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import classification_report, confusion_matrix
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt", default="best.pt")
    parser.add_argument("--data", default="data/val")
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor()])
    ds = datasets.ImageFolder(args.data, tf)
    loader = DataLoader(ds, batch_size=128, num_workers=4, pin_memory=torch.cuda.is_available())

    model = models.resnet50(num_classes=len(ds.classes))
    state = torch.load(args.ckpt, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"] if "model" in state else state)
    model = model.to(device).eval()
    if args.compile:
        model = torch.compile(model)

    all_probs, all_labels, losses = [], [], []
    with torch.inference_mode():
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                logits = model(images)
            losses.append(F.cross_entropy(logits.float(), labels).item())
            all_probs.append(logits.softmax(dim=1).float().cpu())
            all_labels.append(labels.cpu())

    probs = torch.cat(all_probs).numpy()
    labels = torch.cat(all_labels).numpy()
    preds = probs.argmax(1)
    print(f"loss {np.mean(losses):.4f} acc {(preds == labels).mean():.4f}")
    print(classification_report(labels, preds, target_names=ds.classes))
    cm = confusion_matrix(labels, preds)
    plt.imshow(cm, cmap="Blues")
    plt.savefig("confusion.png")

    # free the accelerator for the next job in this process
    model.cpu()
    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
