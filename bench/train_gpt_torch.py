#!/usr/bin/env python3
"""PyTorch training the same model file (samples/gpt.py) on the same corpus, split, vocabulary, batch,
optimizer, schedule and steps as kiln's samples/train_gpt, for the README's side-by-side validation loss.
The batches differ (torch's generator is not kiln's), which is why the two are compared within 2 %.

    /usr/bin/python3 bench/train_gpt_torch.py [--steps 4000] [--threads 2] [--device cuda]
"""
import argparse
import importlib.util
import math
import os
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(HERE, "..", "samples", "gpt.py"))
    ap.add_argument("--data", default="/usr/share/games/fortunes")
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--eval-iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    files = sorted(f for f in os.listdir(a.data) if "." not in f and os.path.isfile(os.path.join(a.data, f)))
    text = b"".join(open(os.path.join(a.data, f), "rb").read() for f in files)
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    n = len(data) * 9 // 10
    train, val = data[:n], data[n:]

    spec = importlib.util.spec_from_file_location("gpt", a.model)
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    cfg = gpt.GPTConfig(block_size=64, vocab_size=len(chars), n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False)
    model = gpt.GPT(cfg).to(a.device)
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), a.device)
    block, batch, warmup, lr, min_lr = 64, 12, 100, 1e-3, 1e-4

    def get_batch(split):
        d = train if split == "train" else val
        ix = torch.randint(len(d) - block - 1, (batch,))
        x = torch.stack([d[i:i + block] for i in ix])
        y = torch.stack([d[i + 1:i + 1 + block] for i in ix])
        return x.to(a.device), y.to(a.device)

    def get_lr(it):
        if it < warmup:
            return lr * (it + 1) / (warmup + 1)
        ratio = min((it - warmup) / max(a.steps - warmup, 1), 1.0)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)

    @torch.no_grad()
    def estimate():
        model.eval()
        out = {}
        for split in ("train", "val"):
            out[split] = sum(model(*get_batch(split))[1].item() for _ in range(a.eval_iters)) / a.eval_iters
        model.train()
        return out

    start = time.time()
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = get_lr(step)
        x, y = get_batch("train")
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if (step + 1) % a.eval_every == 0 or step + 1 == a.steps:
            e = estimate()
            print(f"step {step + 1}: train loss {e['train']:.4f}, val loss {e['val']:.4f} ({time.time() - start:.0f} s)")
    print(f"torch {torch.__version__}: final validation loss {e['val']:.4f}, {(time.time() - start) / a.steps * 1e3:.1f} ms/step")


if __name__ == "__main__":
    main()
