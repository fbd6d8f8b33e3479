#!/usr/bin/env python3
"""PyTorch's side of bench/bench_gpt: the same model file (samples/gpt.py), settings and timing — median ms of
a training step (AdamW) and an eval forward, eager and (torch >= 2) torch.compile'd — as one JSON line.

    python bench/gpt_workloads.py [--threads N] [--steps N] [--compile]
"""
import argparse
import importlib.util
import json
import os
import statistics
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def median_ms(warmup, reps, fn):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(HERE, "..", "samples", "gpt.py"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--compile", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    spec = importlib.util.spec_from_file_location("gpt", a.model)
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    cfg = gpt.GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False)
    model = gpt.GPT(cfg)
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    x = torch.randint(0, 65, (12, 64))
    y = torch.randint(0, 65, (12, 64))

    def step_of(fwd):
        def step():
            _, loss = fwd(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step

    out = {"torch": torch.__version__, "threads": a.threads}
    out["eager_step"] = median_ms(3, a.steps, step_of(model))
    model.eval()
    with torch.no_grad():
        out["eager_eval"] = median_ms(3, a.steps, lambda: model(x, y))
    model.train()
    if a.compile:
        t0 = time.perf_counter()
        compiled = torch.compile(model)
        step = step_of(compiled)
        step()
        out["compile_first_step_s"] = time.perf_counter() - t0
        out["compiled_step"] = median_ms(3, a.steps, step)
        model.eval()
        with torch.no_grad():
            ceval = torch.compile(model)
            ceval(x, y)
            out["compiled_eval"] = median_ms(3, a.steps, lambda: ceval(x, y))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
