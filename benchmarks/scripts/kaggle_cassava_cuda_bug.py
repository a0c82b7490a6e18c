# Kaggle notebook export: Cassava Leaf Disease, resnext50 baseline (training cell + inference cell)
import os
import gc
import time
import random

import numpy as np
import pandas as pd
import cv2
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader
from sklearn.model_selection import StratifiedKFold
from sklearn.metrics import accuracy_score
import timm
import albumentations as A
from albumentations.pytorch import ToTensorV2

CFG = {
    'fold_num': 5,
    'seed': 719,
    'model_arch': 'resnext50_32x4d',
    'img_size': 512,
    'epochs': 10,
    'train_bs': 16,
    'valid_bs': 32,
    'lr': 1e-4,
    'weight_decay': 1e-6,
    'num_workers': 4,
    'device': 'cuda:0'  # either: DEV101
}

device = torch.device(CFG['device'])  # either: DEV101


def seed_everything(seed):
    random.seed(seed)
    os.environ['PYTHONHASHSEED'] = str(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True


class CassavaDataset(Dataset):
    def __init__(self, df, data_root, transforms=None, output_label=True):
        super().__init__()
        self.df = df.reset_index(drop=True).copy()
        self.transforms = transforms
        self.data_root = data_root
        self.output_label = output_label
        if output_label:
            self.labels = self.df['label'].values

    def __len__(self):
        return self.df.shape[0]

    def __getitem__(self, index):
        img = cv2.imread(f"{self.data_root}/{self.df.loc[index]['image_id']}")[:, :, ::-1]
        if self.transforms:
            img = self.transforms(image=img)['image']
        if self.output_label:
            return img, self.labels[index]
        return img


class CassvaImgClassifier(nn.Module):
    def __init__(self, model_arch, n_class, pretrained=False):
        super().__init__()
        self.model = timm.create_model(model_arch, pretrained=pretrained)
        n_features = self.model.fc.in_features
        self.model.fc = nn.Linear(n_features, n_class)

    def forward(self, x):
        return self.model(x)


def train_one_epoch(epoch, model, loss_fn, optimizer, train_loader, scheduler=None):
    model.train()
    running_loss = None
    for step, (imgs, image_labels) in enumerate(train_loader):
        imgs = imgs.cuda().float()  # expect: DEV102
        image_labels = image_labels.cuda().long()  # expect: DEV102
        image_preds = model(imgs)
        loss = loss_fn(image_preds, image_labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if running_loss is None:
            running_loss = loss.item()
        else:
            running_loss = running_loss * .99 + loss.item() * .01
    if scheduler is not None:
        scheduler.step()


def valid_one_epoch(epoch, model, loss_fn, val_loader):
    model.eval()
    image_preds_all = []
    image_targets_all = []
    for step, (imgs, image_labels) in enumerate(val_loader):
        imgs = imgs.to(device).float()
        image_labels = image_labels.to(device).long()
        image_preds = model(imgs)
        image_preds_all += [torch.argmax(image_preds, 1).detach().cpu().numpy()]
        image_targets_all += [image_labels.detach().cpu().numpy()]
    image_preds_all = np.concatenate(image_preds_all)
    image_targets_all = np.concatenate(image_targets_all)
    print('validation multi-class accuracy = {:.4f}'.format((image_preds_all == image_targets_all).mean()))


if __name__ == '__main__':
    seed_everything(CFG['seed'])
    train = pd.read_csv('../input/cassava-leaf-disease-classification/train.csv')
    folds = StratifiedKFold(n_splits=CFG['fold_num'], shuffle=True, random_state=CFG['seed']).split(
        np.arange(train.shape[0]), train.label.values)
    tfm = A.Compose([A.RandomResizedCrop(CFG['img_size'], CFG['img_size']), A.Normalize(), ToTensorV2()])

    for fold, (trn_idx, val_idx) in enumerate(folds):
        train_ds = CassavaDataset(train.loc[trn_idx], '../input/train_images/', transforms=tfm)
        valid_ds = CassavaDataset(train.loc[val_idx], '../input/train_images/', transforms=tfm)
        train_loader = DataLoader(train_ds, batch_size=CFG['train_bs'], pin_memory=False, drop_last=False,
                                  shuffle=True, num_workers=CFG['num_workers'])
        val_loader = DataLoader(valid_ds, batch_size=CFG['valid_bs'], num_workers=CFG['num_workers'],
                                shuffle=False, pin_memory=False)

        model = CassvaImgClassifier(CFG['model_arch'], train.label.nunique(), pretrained=True).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=CFG['lr'], weight_decay=CFG['weight_decay'])
        scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=CFG['epochs'] - 1)

        class_counts = train.loc[trn_idx].label.value_counts().sort_index().values
        weights = torch.tensor(class_counts.sum() / class_counts, dtype=torch.float32)
        loss_tr = nn.CrossEntropyLoss(weight=weights)  # expect: DEV115
        loss_fn = nn.CrossEntropyLoss().to(device)

        for epoch in range(CFG['epochs']):
            train_one_epoch(epoch, model, loss_tr, optimizer, train_loader, scheduler=scheduler)
            with torch.no_grad():
                valid_one_epoch(epoch, model, loss_fn, val_loader)
            torch.save(model.state_dict(), '{}_fold_{}_{}'.format(CFG['model_arch'], fold, epoch))

        del model, optimizer, train_loader, val_loader, scheduler
        torch.cuda.empty_cache()
        gc.collect()

    # inference cell
    test = pd.DataFrame({'image_id': os.listdir('../input/test_images/')})
    test_ds = CassavaDataset(test, '../input/test_images/', transforms=tfm, output_label=False)
    tst_loader = DataLoader(test_ds, batch_size=CFG['valid_bs'], num_workers=CFG['num_workers'], shuffle=False)
    model = CassvaImgClassifier(CFG['model_arch'], 5).to(device)
    preds = []
    for fold in range(CFG['fold_num']):
        model.load_state_dict(torch.load('{}_fold_{}_{}'.format(CFG['model_arch'], fold, CFG['epochs'] - 1)))  # expect: DEV104
        model.eval()
        fold_preds = []
        with torch.no_grad():
            for imgs in tst_loader:
                imgs = imgs.to(device).float()
                fold_preds += [torch.softmax(model(imgs), 1).detach().cpu().numpy()]
        preds.append(np.concatenate(fold_preds, axis=0))
    test['label'] = np.argmax(np.mean(preds, axis=0), axis=1)
    test.to_csv('submission.csv', index=False)
