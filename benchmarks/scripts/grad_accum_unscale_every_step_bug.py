"""A LLM fine-tuning loop with accumulation that unscales on every micro-step (clip logging each
micro-step): the second micro-step raises "unscale_() has already been called"."""
import os
import time

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer, get_linear_schedule_with_warmup


def collate(examples, tokenizer, max_len=512):
    enc = tokenizer([e["text"] for e in examples], truncation=True, max_length=max_len,
                    padding=True, return_tensors="pt")
    enc["labels"] = enc["input_ids"].clone()
    enc["labels"][enc["attention_mask"] == 0] = -100
    return enc


def main():
    model_name = os.environ.get("MODEL", "gpt2")
    accum = int(os.environ.get("ACCUM", 8))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_name)
    tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_name).to(device)
    model.gradient_checkpointing_enable()

    from datasets import load_dataset
    ds = load_dataset("json", data_files="train.jsonl")["train"]
    loader = DataLoader(ds, batch_size=4, shuffle=True, collate_fn=lambda b: collate(b, tokenizer))

    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    total = len(loader) // accum * 3
    scheduler = get_linear_schedule_with_warmup(optimizer, 100, total)
    scaler = torch.amp.GradScaler(device)

    model.train()
    step = 0
    t0 = time.time()
    for epoch in range(3):
        for i, batch in enumerate(loader):
            batch = {k: v.to(device) for k, v in batch.items()}
            with torch.autocast(device_type=device, dtype=torch.float16):
                out = model(**batch)
                loss = out.loss / accum
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)  # expect: DEV207
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if (i + 1) % accum == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
                step += 1
                if step % 10 == 0:
                    print(f"step {step} loss {loss.item() * accum:.3f} gnorm {grad_norm:.2f} "
                          f"{(time.time() - t0) / 10:.2f}s/it")
                    t0 = time.time()
    model.save_pretrained("out")
    tokenizer.save_pretrained("out")


if __name__ == "__main__":
    main()
