"""TrainingStep.from_lightning and TrainingStep.from_hf_trainer with the real packages
(lightning 2.6.6 and transformers 5.23.0 with accelerate import with torch 2.13.0; both are
in the test extras). A step written with a bug shows that the framework's own code runs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from devlint.runtime import TrainingStep, check_step  # noqa: E402
from devlint.runtime.step import Parameters  # noqa: E402

CPU_ONLY = {"devices": ["cpu"], "modes": ["float32", "bfloat16"]}


def lightning_module(bug: bool = False, manual: bool = False):
    L = pytest.importorskip("lightning", reason="lightning is not installed (pip install -e '.[test]')")

    class Classifier(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = not manual
            self.net = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))

        def training_step(self, batch, batch_idx):
            x, y = batch
            if bug:  # the labels made on the CPU: fails on a GPU
                y = torch.arange(x.shape[0]) % 3
            loss = nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss)
            return {"loss": loss}

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), lr=1e-3)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(opt, 1),
                                                       "interval": "epoch"}}

    torch.manual_seed(0)
    return Classifier(), (torch.randn(5, 6), torch.tensor([0, 1, 2, 1, 0]))


def test_lightning_module_step_is_checked():
    module, batch = lightning_module()
    step = TrainingStep.from_lightning(module, batch)
    opt = step.optimizer(Parameters(module))
    assert type(opt) is torch.optim.AdamW and step.scheduler is None  # per-epoch: not in one step
    report = check_step(step, **CPU_ONLY)
    assert report.ok, str(report)
    assert [r.status for r in report.runs if r.device == "cpu"] == ["reference", "ok"]


def test_lightning_training_step_bug_is_found():
    module, batch = lightning_module(bug=True)
    report = check_step(TrainingStep.from_lightning(module, batch), **CPU_ONLY)
    assert not report.ok
    assert any(f.kind == "device-placement" and "aten.arange" in f.message for f in report.findings), str(report)


def test_lightning_manual_optimization_is_refused():
    module, batch = lightning_module(manual=True)
    with pytest.raises(TypeError, match="manual optimization"):
        TrainingStep.from_lightning(module, batch)


def hf_trainer(cls_body=None, **kwargs):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="the Trainer needs accelerate (pip install -e '.[test]')")
    config = transformers.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, num_labels=3, max_position_embeddings=16)
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    args = transformers.TrainingArguments(output_dir="unused", report_to=[], use_cpu=True, learning_rate=1e-3,
                                          weight_decay=0.01)
    cls = type("MyTrainer", (transformers.Trainer,), cls_body) if cls_body else transformers.Trainer
    inputs = {"input_ids": torch.randint(0, 40, (4, 8)), "labels": torch.tensor([0, 2, 1, 0])}
    return cls(model=model, args=args, **kwargs), inputs


def test_hf_trainer_step_is_checked():
    trainer, inputs = hf_trainer()
    step = TrainingStep.from_hf_trainer(trainer, inputs)
    opt = step.optimizer(Parameters(trainer.model))
    assert type(opt) is torch.optim.AdamW and [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]
    assert trainer.optimizer is None and step.clip_grad_norm == 1.0
    report = check_step(step, **CPU_ONLY)
    assert report.ok, str(report)


def test_hf_trainer_compute_loss_override_is_used():
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        logits = model(**inputs).logits
        weight = torch.tensor([1.0, 2.0, 1.0])  # made on the CPU: fails on a GPU
        return nn.functional.cross_entropy(logits, labels, weight=weight)

    trainer, inputs = hf_trainer({"compute_loss": compute_loss})
    report = check_step(TrainingStep.from_hf_trainer(trainer, inputs), **CPU_ONLY)
    assert any(f.kind == "device-placement" for f in report.findings), str(report)


def test_hf_trainer_with_an_optimizer_instance_is_refused():
    trainer, inputs = hf_trainer()
    trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="optimizer_cls_and_kwargs"):
        TrainingStep.from_hf_trainer(trainer, inputs)
