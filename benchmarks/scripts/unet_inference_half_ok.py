"""Batch inference for a trained segmentation UNet: weights loaded on the CPU, the model cast to
half on CUDA for speed (inference only, so no DEV208), masks read out with .cpu().numpy()."""
import argparse
import os

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision import transforms

from unet import UNet


def predict(net, image, device, use_half, scale=0.5, threshold=0.5):
    net.eval()
    w, h = image.size
    img = transforms.functional.to_tensor(image.resize((int(w * scale), int(h * scale))))
    img = img.unsqueeze(0).to(device=device, dtype=torch.half if use_half else torch.float32)
    with torch.no_grad():
        output = net(img)
        output = F.interpolate(output.float(), (h, w), mode="bilinear")
        if net.n_classes > 1:
            mask = output.argmax(dim=1)
        else:
            mask = torch.sigmoid(output) > threshold
    return mask[0].long().squeeze().cpu().numpy()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="MODEL.pth")
    parser.add_argument("--input", nargs="+", required=True)
    parser.add_argument("--out-dir", default="masks")
    parser.add_argument("--classes", type=int, default=2)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    use_half = device.type == "cuda"
    net = UNet(n_channels=3, n_classes=args.classes)
    state_dict = torch.load(args.model, map_location="cpu")
    mask_values = state_dict.pop("mask_values", [0, 1])
    net.load_state_dict(state_dict)
    net.to(device)
    if use_half:
        net.half()

    os.makedirs(args.out_dir, exist_ok=True)
    for path in args.input:
        mask = predict(net, Image.open(path).convert("RGB"), device, use_half)
        out = np.zeros(mask.shape, dtype=np.uint8)
        for i, v in enumerate(mask_values):
            out[mask == i] = v * 255 if isinstance(v, int) else v
        Image.fromarray(out).save(os.path.join(args.out_dir, os.path.basename(path)))


if __name__ == "__main__":
    main()
