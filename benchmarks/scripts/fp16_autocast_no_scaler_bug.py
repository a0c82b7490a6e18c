"""A UNet segmentation trainer that turned on torch.cuda.amp.autocast for speed and never added a
GradScaler: small fp16 gradients underflow to zero."""
import argparse
import logging
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, random_split
from tqdm import tqdm

from unet import UNet
from utils.data_loading import BasicDataset
from utils.dice_score import dice_loss

dir_img = Path('./data/imgs/')
dir_mask = Path('./data/masks/')


def train_model(model, device, epochs=5, batch_size=1, learning_rate=1e-5, val_percent=0.1,
                img_scale=0.5, amp=False, weight_decay=1e-8, momentum=0.999, gradient_clipping=1.0):
    dataset = BasicDataset(dir_img, dir_mask, img_scale)
    n_val = int(len(dataset) * val_percent)
    n_train = len(dataset) - n_val
    train_set, val_set = random_split(dataset, [n_train, n_val], generator=torch.Generator().manual_seed(0))

    loader_args = dict(batch_size=batch_size, num_workers=4, pin_memory=True)  # either: DEV106
    train_loader = DataLoader(train_set, shuffle=True, **loader_args)

    optimizer = optim.RMSprop(model.parameters(), lr=learning_rate, weight_decay=weight_decay,
                              momentum=momentum, foreach=True)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, 'max', patience=5)
    criterion = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()
    global_step = 0

    for epoch in range(1, epochs + 1):
        model.train()
        epoch_loss = 0
        with tqdm(total=n_train, desc=f'Epoch {epoch}/{epochs}', unit='img') as pbar:
            for batch in train_loader:
                images, true_masks = batch['image'], batch['mask']
                images = images.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
                true_masks = true_masks.to(device=device, dtype=torch.long)

                with torch.cuda.amp.autocast(enabled=amp):  # expect: DEV202 DEV206
                    masks_pred = model(images)
                    if model.n_classes == 1:
                        loss = criterion(masks_pred.squeeze(1), true_masks.float())
                        loss += dice_loss(F.sigmoid(masks_pred.squeeze(1)), true_masks.float(), multiclass=False)
                    else:
                        loss = criterion(masks_pred, true_masks)
                        loss += dice_loss(F.softmax(masks_pred, dim=1).float(),
                                          F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(),
                                          multiclass=True)

                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
                optimizer.step()

                pbar.update(images.shape[0])
                global_step += 1
                epoch_loss += loss.item()
                pbar.set_postfix(**{'loss (batch)': loss.item()})


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description='Train the UNet on images and target masks')
    parser.add_argument('--epochs', '-e', type=int, default=5)
    parser.add_argument('--batch-size', '-b', dest='batch_size', type=int, default=1)
    parser.add_argument('--learning-rate', '-l', type=float, default=1e-5, dest='lr')
    parser.add_argument('--load', '-f', type=str, default=False)
    parser.add_argument('--amp', action='store_true', default=False)
    parser.add_argument('--classes', '-c', type=int, default=2)
    args = parser.parse_args()

    logging.basicConfig(level=logging.INFO, format='%(levelname)s: %(message)s')
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    model = UNet(n_channels=3, n_classes=args.classes, bilinear=False)
    model = model.to(memory_format=torch.channels_last)
    if args.load:
        state_dict = torch.load(args.load, map_location=device)
        del state_dict['mask_values']
        model.load_state_dict(state_dict)
    model.to(device=device)
    train_model(model=model, epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.lr,
                device=device, amp=args.amp)
