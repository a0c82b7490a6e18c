"""LoRA-free full fine-tuning of a small LLM whose weights are cast to bfloat16, with a GradScaler
kept from an fp16 recipe: with bf16 gradients, unscale_ raises."""
import math
import os

import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling
from datasets import load_dataset

model_name = os.environ.get("MODEL", "Qwen/Qwen2.5-0.5B")
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

tokenizer = AutoTokenizer.from_pretrained(model_name)
model = AutoModelForCausalLM.from_pretrained(model_name)
model = model.to(device=device, dtype=torch.bfloat16)  # either: DEV208 (the same bug as DEV209 below, reported at the cast)
model.gradient_checkpointing_enable()

ds = load_dataset("tatsu-lab/alpaca", split="train[:5%]")
ds = ds.map(lambda e: tokenizer(e["text"], truncation=True, max_length=512), remove_columns=ds.column_names)
loader = DataLoader(ds, batch_size=4, shuffle=True,
                    collate_fn=DataCollatorForLanguageModeling(tokenizer, mlm=False))

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0)
scaler = torch.amp.GradScaler(device.type)  # expect: DEV209
sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 100))

model.train()
for step, batch in enumerate(loader):
    batch = {k: v.to(device) for k, v in batch.items()}
    loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    sched.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.3f} ppl {math.exp(loss.item()):.1f}")
model.save_pretrained("out-bf16")
