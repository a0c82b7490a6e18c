"""A YOLOv5-style train() (ultralytics/yolov5 train.py, condensed): select_device, DDP via RANK,
torch.cuda.amp autocast/GradScaler, accumulate/unscale_/clip/step/update, EMA."""
import math
import os
import random
import time
from copy import deepcopy
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.optim import lr_scheduler
from tqdm import tqdm

from models.yolo import Model
from utils.dataloaders import create_dataloader
from utils.loss import ComputeLoss
from utils.torch_utils import ModelEMA, select_device, smart_DDP, smart_optimizer, torch_distributed_zero_first
from utils.general import check_amp, one_cycle, init_seeds

LOCAL_RANK = int(os.getenv("LOCAL_RANK", -1))
RANK = int(os.getenv("RANK", -1))
WORLD_SIZE = int(os.getenv("WORLD_SIZE", 1))


def train(hyp, opt, device):
    save_dir, epochs, batch_size, weights = Path(opt.save_dir), opt.epochs, opt.batch_size, opt.weights
    cuda = device.type != "cpu"
    init_seeds(opt.seed + 1 + RANK, deterministic=True)
    nc = int(opt.nc)

    pretrained = weights.endswith(".pt")
    if pretrained:
        with torch_distributed_zero_first(LOCAL_RANK):
            ckpt = torch.load(weights, map_location="cpu")  # load checkpoint to CPU to avoid CUDA memory leak
        model = Model(opt.cfg or ckpt["model"].yaml, ch=3, nc=nc, anchors=hyp.get("anchors")).to(device)
        csd = ckpt["model"].float().state_dict()
        model.load_state_dict(csd, strict=False)
    else:
        model = Model(opt.cfg, ch=3, nc=nc, anchors=hyp.get("anchors")).to(device)
    amp = check_amp(model)

    nbs = 64  # nominal batch size
    accumulate = max(round(nbs / batch_size), 1)
    hyp["weight_decay"] *= batch_size * accumulate / nbs
    optimizer = smart_optimizer(model, opt.optimizer, hyp["lr0"], hyp["momentum"], hyp["weight_decay"])

    lf = one_cycle(1, hyp["lrf"], epochs)
    scheduler = lr_scheduler.LambdaLR(optimizer, lr_lambda=lf)
    ema = ModelEMA(model) if RANK in {-1, 0} else None

    # DP mode
    if cuda and RANK == -1 and torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model)

    # SyncBatchNorm
    if opt.sync_bn and cuda and RANK != -1:
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model).to(device)

    train_loader, dataset = create_dataloader(opt.train_path, opt.imgsz, batch_size // WORLD_SIZE, 32,
                                              hyp=hyp, augment=True, rank=LOCAL_RANK, workers=opt.workers,
                                              shuffle=True)
    nb = len(train_loader)

    if cuda and RANK != -1:
        model = smart_DDP(model)

    compute_loss = ComputeLoss(model)
    nw = max(round(hyp["warmup_epochs"] * nb), 100)
    last_opt_step = -1
    scheduler.last_epoch = -1
    scaler = torch.cuda.amp.GradScaler(enabled=amp)  # expect: DEV206
    for epoch in range(epochs):
        model.train()
        mloss = torch.zeros(3, device=device)  # mean losses
        if RANK != -1:
            train_loader.sampler.set_epoch(epoch)
        pbar = enumerate(train_loader)
        if RANK in {-1, 0}:
            pbar = tqdm(pbar, total=nb)
        optimizer.zero_grad()
        for i, (imgs, targets, paths, _) in pbar:
            ni = i + nb * epoch
            imgs = imgs.to(device, non_blocking=True).float() / 255

            # Warmup
            if ni <= nw:
                xi = [0, nw]
                accumulate = max(1, np.interp(ni, xi, [1, nbs / batch_size]).round())
                for j, x in enumerate(optimizer.param_groups):
                    x["lr"] = np.interp(ni, xi, [hyp["warmup_bias_lr"] if j == 0 else 0.0, x["initial_lr"] * lf(epoch)])

            # Forward
            with torch.cuda.amp.autocast(amp):  # expect: DEV206
                pred = model(imgs)
                loss, loss_items = compute_loss(pred, targets.to(device))
                if RANK != -1:
                    loss *= WORLD_SIZE

            # Backward
            scaler.scale(loss).backward()

            # Optimize
            if ni - last_opt_step >= accumulate:
                scaler.unscale_(optimizer)  # unscale gradients
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)  # clip gradients
                scaler.step(optimizer)  # optimizer.step
                scaler.update()
                optimizer.zero_grad()
                if ema:
                    ema.update(model)
                last_opt_step = ni

            if RANK in {-1, 0}:
                mloss = (mloss * i + loss_items) / (i + 1)
                mem = f"{torch.cuda.memory_reserved() / 1E9 if torch.cuda.is_available() else 0:.3g}G"
                pbar.set_description(("%11s" * 2 + "%11.4g" * 5) % (f"{epoch}/{epochs - 1}", mem, *mloss,
                                                                    targets.shape[0], imgs.shape[-1]))

        scheduler.step()
        if RANK in {-1, 0}:
            ckpt = {"epoch": epoch, "model": deepcopy(ema.ema).half(), "optimizer": optimizer.state_dict()}
            torch.save(ckpt, save_dir / "last.pt")
            del ckpt

    torch.cuda.empty_cache()


def main(opt):
    device = select_device(opt.device, batch_size=opt.batch_size)
    if LOCAL_RANK != -1:
        assert torch.cuda.device_count() > LOCAL_RANK, "insufficient CUDA devices for DDP command"
        torch.cuda.set_device(LOCAL_RANK)  # either: DEV105
        device = torch.device("cuda", LOCAL_RANK)  # either: DEV101
        dist.init_process_group(backend="nccl" if dist.is_nccl_available() else "gloo")
    train(opt.hyp, opt, device)
