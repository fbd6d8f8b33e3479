#!/usr/bin/env python3
"""PyTorch's side of bench/bench_resnet: torchvision's ResNet-18 (ResNet(BasicBlock, [2, 2, 2, 2], num_classes=10)),
32x32 images at batch 32, median ms of a training step (cross_entropy, SGD momentum 0.9) and an eval forward,
eager and (torch >= 2, --compile) torch.compile'd, as one JSON line.

    python bench/resnet_workloads.py [--threads N] [--steps N] [--compile] [--cpu-time] [--bf16]

--bf16: forward and loss (training) and the eval forward under torch.autocast("cpu", torch.bfloat16).

The model is the installed torchvision's (the virtualenv's torchvision for PyTorch 2.x, Debian's for 1.13):
the same resnet.py text up to torchvision's version, which kiln's column scripts from Debian's file.
"""
import argparse
import contextlib
import json
import time

import torch
import torch.nn.functional as F
from torchvision.models import resnet

from median_clock import median_ms, use_cpu_time  # noqa: E402 (bench/, beside this file)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--cpu-time", action="store_true")
    ap.add_argument("--bf16", action="store_true", help='under torch.autocast("cpu", torch.bfloat16)')
    a = ap.parse_args()
    if a.cpu_time:
        use_cpu_time()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = resnet.ResNet(resnet.BasicBlock, [2, 2, 2, 2], num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(32, 3, 32, 32)
    y = torch.randint(0, 10, (32,))

    def autocast():
        return torch.autocast("cpu", torch.bfloat16) if a.bf16 else contextlib.nullcontext()

    def step_of(fwd):
        def step():
            with autocast():
                loss = F.cross_entropy(fwd(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step

    import torchvision
    out = {"torch": torch.__version__, "torchvision": torchvision.__version__, "bf16": a.bf16, "threads": a.threads}
    model.train()
    out["eager_step"] = median_ms(3, a.steps, step_of(model))
    model.eval()
    with torch.no_grad(), autocast():
        out["eager_eval"] = median_ms(3, a.steps, lambda: model(x))
    if a.compile:
        model.train()
        t0 = time.perf_counter()
        step = step_of(torch.compile(model))
        step()
        out["compile_first_step_s"] = time.perf_counter() - t0
        out["compiled_step"] = median_ms(3, a.steps, step)
        model.eval()
        with torch.no_grad(), autocast():
            ceval = torch.compile(model)
            ceval(x)
            out["compiled_eval"] = median_ms(3, a.steps, lambda: ceval(x))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
