"""A timm-style train.py (the parts that matter here): amp_autocast partial, NativeScaler wrapper,
prefetcher-or-move, accumulation with need_update, distributed sampler epochs."""
import argparse
import time
from contextlib import suppress
from functools import partial

import torch
import torch.nn as nn
import torch.utils.data
from torch.nn.parallel import DistributedDataParallel as NativeDDP

from timm import utils
from timm.data import create_dataset, create_loader, Mixup
from timm.loss import SoftTargetCrossEntropy
from timm.models import create_model, model_parameters
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2

has_compile = hasattr(torch, 'compile')


def dispatch_clip_grad(parameters, value, mode='norm', norm_type=2.0):
    if mode == 'norm':
        torch.nn.utils.clip_grad_norm_(parameters, value, norm_type=norm_type)
    elif mode == 'value':
        torch.nn.utils.clip_grad_value_(parameters, value)
    else:
        assert False, f"Unknown clip mode ({mode})."


class NativeScaler:
    state_dict_key = "amp_scaler"

    def __init__(self, device='cuda'):  # either: DEV101
        try:
            self._scaler = torch.amp.GradScaler(device=device)
        except (AttributeError, TypeError) as e:
            self._scaler = torch.cuda.amp.GradScaler()  # either: DEV206

    def __call__(self, loss, optimizer, clip_grad=None, clip_mode='norm', parameters=None,
                 create_graph=False, need_update=True):
        self._scaler.scale(loss).backward(create_graph=create_graph)
        if need_update:
            if clip_grad is not None:
                assert parameters is not None
                self._scaler.unscale_(optimizer)  # unscale the gradients of optimizer's assigned params in-place
                dispatch_clip_grad(parameters, clip_grad, mode=clip_mode)
            self._scaler.step(optimizer)
            self._scaler.update()

    def state_dict(self):
        return self._scaler.state_dict()

    def load_state_dict(self, state_dict):
        self._scaler.load_state_dict(state_dict)


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, device=torch.device('cuda'),  # expect: DEV101
                    lr_scheduler=None, amp_autocast=suppress, loss_scaler=None, mixup_fn=None, num_updates_total=None):
    second_order = hasattr(optimizer, 'is_second_order') and optimizer.is_second_order
    has_no_sync = hasattr(model, "no_sync")
    update_time_m = utils.AverageMeter()
    losses_m = utils.AverageMeter()

    model.train()

    accum_steps = args.grad_accum_steps
    last_accum_steps = len(loader) % accum_steps
    updates_per_epoch = (len(loader) + accum_steps - 1) // accum_steps
    num_updates = epoch * updates_per_epoch
    last_batch_idx = len(loader) - 1
    last_batch_idx_to_accum = len(loader) - last_accum_steps

    update_start_time = time.time()
    optimizer.zero_grad()
    for batch_idx, (input, target) in enumerate(loader):
        last_batch = batch_idx == last_batch_idx
        need_update = last_batch or (batch_idx + 1) % accum_steps == 0
        update_idx = batch_idx // accum_steps
        if batch_idx >= last_batch_idx_to_accum:
            accum_steps = last_accum_steps

        if not args.prefetcher:
            input, target = input.to(device), target.to(device)
            if mixup_fn is not None:
                input, target = mixup_fn(input, target)
        if args.channels_last:
            input = input.contiguous(memory_format=torch.channels_last)

        def _forward():
            with amp_autocast():
                output = model(input)
                loss = loss_fn(output, target)
            if accum_steps > 1:
                loss /= accum_steps
            return loss

        def _backward(_loss):
            if loss_scaler is not None:
                loss_scaler(
                    _loss,
                    optimizer,
                    clip_grad=args.clip_grad,
                    clip_mode=args.clip_mode,
                    parameters=model_parameters(model, exclude_head='agc' in args.clip_mode),
                    create_graph=second_order,
                    need_update=need_update,
                )
            else:
                _loss.backward(create_graph=second_order)
                if need_update:
                    if args.clip_grad is not None:
                        dispatch_clip_grad(
                            model_parameters(model, exclude_head='agc' in args.clip_mode),
                            value=args.clip_grad,
                            mode=args.clip_mode,
                        )
                    optimizer.step()

        if has_no_sync and not need_update:
            with model.no_sync():
                loss = _forward()
                _backward(loss)
        else:
            loss = _forward()
            _backward(loss)

        if not args.distributed:
            losses_m.update(loss.item() * accum_steps, input.size(0))

        if not need_update:
            continue

        num_updates += 1
        optimizer.zero_grad()

        if device.type == 'cuda':
            torch.cuda.synchronize()

        if lr_scheduler is not None:
            lr_scheduler.step_update(num_updates=num_updates, metric=losses_m.avg)

        update_time_m.update(time.time() - update_start_time)
        update_start_time = time.time()

    return {'loss': losses_m.avg}


def validate(model, loader, loss_fn, args, device=torch.device('cuda'), amp_autocast=suppress):  # expect: DEV101
    losses_m = utils.AverageMeter()
    top1_m = utils.AverageMeter()
    model.eval()
    with torch.no_grad():
        for batch_idx, (input, target) in enumerate(loader):
            if not args.prefetcher:
                input = input.to(device)
                target = target.to(device)
            if args.channels_last:
                input = input.contiguous(memory_format=torch.channels_last)

            with amp_autocast():
                output = model(input)
                loss = loss_fn(output, target)
            acc1, acc5 = utils.accuracy(output, target, topk=(1, 5))
            if device.type == 'cuda':
                torch.cuda.synchronize()
            losses_m.update(loss.item(), input.size(0))
            top1_m.update(acc1.item(), output.size(0))
    return {'loss': losses_m.avg, 'top1': top1_m.avg}


def main(args):
    device = utils.init_distributed_device(args)
    model = create_model(args.model, pretrained=args.pretrained, num_classes=args.num_classes)
    model.to(device=device)
    if args.channels_last:
        model.to(memory_format=torch.channels_last)

    optimizer = create_optimizer_v2(model, opt=args.opt, lr=args.lr, weight_decay=args.weight_decay)

    amp_autocast = suppress  # do nothing
    loss_scaler = None
    amp_dtype = torch.bfloat16 if args.amp_dtype == 'bfloat16' else torch.float16
    if args.amp:
        try:
            amp_autocast = partial(torch.autocast, device_type=device.type, dtype=amp_dtype)
        except (AttributeError, TypeError):
            # fallback to CUDA only AMP for PyTorch < 1.10
            assert device.type == 'cuda'
            amp_autocast = torch.cuda.amp.autocast  # either: DEV206
        if device.type == 'cuda' and amp_dtype == torch.float16:
            # loss scaler only used for float16 (vs bfloat16) dtype
            loss_scaler = NativeScaler()

    if args.distributed:
        model = NativeDDP(model, device_ids=[device], broadcast_buffers=not args.no_ddp_bb)
    if args.torchcompile:
        assert has_compile
        model = torch.compile(model, backend=args.torchcompile)

    dataset_train = create_dataset(args.dataset, root=args.data_dir, split=args.train_split, is_training=True)
    dataset_eval = create_dataset(args.dataset, root=args.data_dir, split=args.val_split, is_training=False)
    loader_train = create_loader(dataset_train, input_size=(3, 224, 224), batch_size=args.batch_size,
                                 is_training=True, use_prefetcher=args.prefetcher, device=device,
                                 distributed=args.distributed)
    loader_eval = create_loader(dataset_eval, input_size=(3, 224, 224), batch_size=args.batch_size,
                                is_training=False, use_prefetcher=args.prefetcher, device=device,
                                distributed=args.distributed)

    mixup_fn = Mixup(mixup_alpha=args.mixup) if args.mixup > 0 else None
    train_loss_fn = SoftTargetCrossEntropy() if mixup_fn is not None else nn.CrossEntropyLoss()
    train_loss_fn = train_loss_fn.to(device=device)
    validate_loss_fn = nn.CrossEntropyLoss().to(device=device)

    lr_scheduler, num_epochs = create_scheduler_v2(optimizer, **vars(args))
    for epoch in range(num_epochs):
        if hasattr(dataset_train, 'set_epoch'):
            dataset_train.set_epoch(epoch)
        elif args.distributed and hasattr(loader_train.sampler, 'set_epoch'):
            loader_train.sampler.set_epoch(epoch)

        train_metrics = train_one_epoch(epoch, model, loader_train, optimizer, train_loss_fn, args,
                                        device=device, lr_scheduler=lr_scheduler, amp_autocast=amp_autocast,
                                        loss_scaler=loss_scaler, mixup_fn=mixup_fn)
        eval_metrics = validate(model, loader_eval, validate_loss_fn, args, device=device, amp_autocast=amp_autocast)
        lr_scheduler.step(epoch + 1, eval_metrics['top1'])
