"""A T5 summarisation fine-tune where the backward and step were indented into the autocast block."""
import os

import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, DataCollatorForSeq2Seq
from datasets import load_dataset

MODEL = os.environ.get("MODEL", "t5-small")
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

tokenizer = AutoTokenizer.from_pretrained(MODEL)
model = AutoModelForSeq2SeqLM.from_pretrained(MODEL).to(device)
raw = load_dataset("cnn_dailymail", "3.0.0")


def preprocess(batch):
    inputs = tokenizer(["summarize: " + a for a in batch["article"]], max_length=512, truncation=True)
    labels = tokenizer(text_target=batch["highlights"], max_length=128, truncation=True)
    inputs["labels"] = labels["input_ids"]
    return inputs


train_ds = raw["train"].select(range(20000)).map(preprocess, batched=True, remove_columns=raw["train"].column_names)
collator = DataCollatorForSeq2Seq(tokenizer, model=model)
loader = DataLoader(train_ds, batch_size=8, shuffle=True, collate_fn=collator)

optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
scaler = torch.amp.GradScaler(device.type)

model.train()
for epoch in range(3):
    for step, batch in enumerate(loader):
        batch = {k: v.to(device) for k, v in batch.items()}
        optimizer.zero_grad()
        with torch.autocast(device_type=device.type, dtype=torch.float16):
            outputs = model(**batch)
            loss = outputs.loss
            scaler.scale(loss).backward()  # expect: DEV201
            scaler.step(optimizer)
            scaler.update()
        if step % 100 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")

model.eval()
article = raw["test"][0]["article"]
enc = tokenizer("summarize: " + article, return_tensors="pt", truncation=True, max_length=512).to(device)
with torch.no_grad():
    summary_ids = model.generate(**enc, max_new_tokens=64, num_beams=4)
print(tokenizer.decode(summary_ids[0], skip_special_tokens=True))
model.save_pretrained("t5-cnn")
