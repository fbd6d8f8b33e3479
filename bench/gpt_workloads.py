#!/usr/bin/env python3
"""PyTorch's side of bench/bench_gpt: the same model file (samples/gpt.py), settings and timing — median ms of
a training step (AdamW) and an eval forward, eager and (torch >= 2) torch.compile'd — as one JSON line.

    python bench/gpt_workloads.py [--threads N] [--steps N] [--compile] [--cpu-time] [--attention sdpa|written] [--bf16]
"""
import argparse
import contextlib
import json
import os
import sys
import time
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


from median_clock import median_ms, use_cpu_time  # noqa: E402 (bench/, beside this file)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(HERE, "..", "samples", "gpt.py"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--compile", action="store_true")
    # this thread's CPU time, as bench_gpt --cpu-time: valid at 1 thread, far less inflated by a loaded machine
    ap.add_argument("--cpu-time", action="store_true")
    # sdpa: the file as written; written: nanoGPT's flash switch off, its spelled-out attention
    # (the same one-line rewrite as bench_gpt --attention written)
    ap.add_argument("--attention", choices=("sdpa", "written"), default="sdpa")
    ap.add_argument("--bf16", action="store_true", help='under torch.autocast("cpu", torch.bfloat16)')
    a = ap.parse_args()
    if a.cpu_time:
        use_cpu_time()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    source = open(a.model).read()
    if a.attention == "written":
        switch = "self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')"
        assert switch in source, f"{a.model} has no line {switch!r}"
        source = source.replace(switch, "self.flash = False")
    gpt = types.ModuleType("gpt")
    gpt.__file__ = a.model
    # the model file's own messages go to stderr: stdout is the JSON line
    with contextlib.redirect_stdout(sys.stderr):
        sys.modules["gpt"] = gpt  # dataclasses look the module up by name
        exec(compile(source, a.model, "exec"), gpt.__dict__)
        cfg = gpt.GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False)
        model = gpt.GPT(cfg)
        opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    x = torch.randint(0, 65, (12, 64))
    y = torch.randint(0, 65, (12, 64))

    def autocast():
        return torch.autocast("cpu", torch.bfloat16) if a.bf16 else contextlib.nullcontext()

    def step_of(fwd):
        def step():
            with autocast():
                _, loss = fwd(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step

    flash = any(getattr(m, "flash", False) for m in model.modules())
    out = {"torch": torch.__version__, "bf16": a.bf16, "attention": "sdpa" if flash else "written", "threads": a.threads}
    out["eager_step"] = median_ms(3, a.steps, step_of(model))
    model.eval()
    with torch.no_grad(), autocast():
        out["eager_eval"] = median_ms(3, a.steps, lambda: model(x, y))
        prompt = torch.zeros((1, 1), dtype=torch.long)
        gen_ms = median_ms(1, max(3, a.steps // 5), lambda: model.generate(prompt, 100, 1.0, 10))
        out["generate_tokens_per_s"] = 100.0 / gen_ms * 1e3
    model.train()
    if a.compile:
        t0 = time.perf_counter()
        compiled = torch.compile(model)
        step = step_of(compiled)
        step()
        out["compile_first_step_s"] = time.perf_counter() - t0
        out["compiled_step"] = median_ms(3, a.steps, step)
        model.eval()
        with torch.no_grad(), autocast():
            ceval = torch.compile(model)
            ceval(x, y)
            out["compiled_eval"] = median_ms(3, a.steps, lambda: ceval(x, y))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
