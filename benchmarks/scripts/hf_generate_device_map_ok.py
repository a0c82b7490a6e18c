"""Batch generation with a Hugging Face causal LM placed by device_map="auto" (accelerate's big-model
inference): inputs follow model.device, results are read out with .cpu()/.tolist()."""
import argparse
import json

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def load(model_id, dtype):
    tokenizer = AutoTokenizer.from_pretrained(model_id, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_id, device_map="auto", torch_dtype=dtype)
    model.eval()
    return tokenizer, model


@torch.inference_mode()
def generate(tokenizer, model, prompts, max_new_tokens=128, batch_size=8):
    outputs = []
    for i in range(0, len(prompts), batch_size):
        chunk = prompts[i:i + batch_size]
        inputs = tokenizer(chunk, return_tensors="pt", padding=True).to(model.device)
        generated = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                   pad_token_id=tokenizer.pad_token_id)
        new_tokens = generated[:, inputs["input_ids"].shape[1]:].cpu()
        outputs.extend(tokenizer.batch_decode(new_tokens, skip_special_tokens=True))
    return outputs


@torch.inference_mode()
def score(tokenizer, model, texts):
    """Per-text mean token log-likelihood."""
    results = []
    for text in texts:
        enc = tokenizer(text, return_tensors="pt")
        input_ids = enc["input_ids"].to(model.device)
        logits = model(input_ids).logits[:, :-1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        token_lp = logprobs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
        results.append(token_lp.mean().item())
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="meta-llama/Llama-3.2-1B-Instruct")
    parser.add_argument("--prompts", default="prompts.jsonl")
    parser.add_argument("--out", default="generations.jsonl")
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()

    dtype = torch.bfloat16 if args.bf16 else torch.float32
    tokenizer, model = load(args.model, dtype)
    prompts = [json.loads(line)["prompt"] for line in open(args.prompts)]
    completions = generate(tokenizer, model, prompts)
    scores = score(tokenizer, model, [p + c for p, c in zip(prompts, completions)])
    with open(args.out, "w") as f:
        for p, c, s in zip(prompts, completions, scores):
            f.write(json.dumps({"prompt": p, "completion": c, "loglik": s}) + "\n")
    if torch.cuda.is_available():
        print(f"peak memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
