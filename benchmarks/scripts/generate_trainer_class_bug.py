# A small fine-tuning wrapper class for a causal language model: the model is moved in
# __init__ and kept on self.model. The evaluation loop moves the attention mask but hands the
# input ids to self.model.generate() on the CPU.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class PromptDataset(Dataset):
    def __init__(self, prompts, width=16):
        self.rows = [[(hash(w) % 500) + 1 for w in p.split()][:width] for p in prompts]
        self.width = width

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids = self.rows[i] + [0] * (self.width - len(self.rows[i]))
        ids = torch.tensor(ids)
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}


class FineTuner:
    def __init__(self, model, device, lr=5e-5):
        self.device = device
        self.model = model.to(device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)

    def train_epoch(self, loader):
        self.model.train()
        for batch in loader:
            batch = {k: v.to(self.device) for k, v in batch.items()}
            out = self.model(**batch, labels=batch["input_ids"])
            out.loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()

    @torch.no_grad()
    def sample(self, loader, max_new_tokens=20):
        self.model.eval()
        texts = []
        for batch in loader:
            mask = batch["attention_mask"].to(self.device)
            tokens = self.model.generate(batch["input_ids"], attention_mask=mask, max_new_tokens=max_new_tokens)  # expect: DEV111
            texts.extend(tokens.tolist())
        return texts


def build_model():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained("sshleifer/tiny-gpt2")


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    prompts = ["the quick brown fox", "a model on a device", "batches stay behind"] * 8
    loader = DataLoader(PromptDataset(prompts), batch_size=4)
    tuner = FineTuner(build_model(), device)
    tuner.train_epoch(loader)
    print(len(tuner.sample(loader)))


if __name__ == "__main__":
    main()
