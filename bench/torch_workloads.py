#!/usr/bin/env python3
"""The workloads of bench/bench_eager.cpp under PyTorch eager, for bench/compare.

Usage: torch_workloads.py --threads N [--only dispatch,add,chain,matmul,copy] [--reps R]
Prints one JSON object: per workload the best and median seconds per call over R repetitions,
plus the derived rate (ns/op, GB/s or GFLOP/s) computed from the best, with the same byte and
flop conventions as the kiln suite.
"""
import argparse
import json
import os
import re
import statistics
import time

import torch

BIG = 1 << 24
MAT = 1024


def timed(fn, min_time=0.25, reps=5):
    """Seconds per call of fn(): R repetitions, each looping until min_time has passed."""
    fn()
    fn()
    # calibrate the inner count so one repetition lasts about min_time
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time / 4 or n >= 1 << 24:
            break
        n *= 4 if t < min_time / 40 else 2
    n = max(1, int(n * min_time / max(t, 1e-9)))
    per = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n)
    return {"best_s": min(per), "median_s": statistics.median(per), "reps": reps, "iters": n}


def cpu_capability():
    if hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability"):
        return torch.backends.cpu.get_cpu_capability()
    m = re.search(r"CPU capability usage: (\S+)", torch.__config__.show())
    return m.group(1) if m else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--only", default="dispatch,add,chain,matmul,copy,layout,mlp")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.25)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    only = set(args.only.split(","))
    out = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu_capability": cpu_capability(),
        "env": {k: os.environ.get(k, "(unset)") for k in
                ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY",
                 "LD_PRELOAD", "MALLOC_CONF")},
        "results": {},
    }
    R = out["results"]
    T = lambda fn: timed(fn, args.min_time, args.reps)

    if "dispatch" in only:
        a, b = torch.ones(1), torch.ones(1)
        r = T(lambda: a + b)
        r["ns_per_op"] = r["best_s"] * 1e9
        R["dispatch_add1"] = r
        with torch.inference_mode():
            a, b = torch.ones(1), torch.ones(1)
            r = T(lambda: a + b)
        r["ns_per_op"] = r["best_s"] * 1e9
        R["dispatch_add1_inference"] = r

    if "add" in only:
        a, b = torch.rand(BIG), torch.rand(BIG)
        r = T(lambda: a + b)
        r["GBps_12B"] = 12 * BIG / r["best_s"] / 1e9
        r["GBps_8B"] = 8 * BIG / r["best_s"] / 1e9
        R["add16M"] = r
        del a, b

    if "chain" in only:
        x = torch.randn(BIG)
        r = T(lambda: torch.sigmoid(torch.tanh(x * 1.5 + 0.5) * x) + torch.exp(x) * 0.1 - x)
        r["GBps_8B"] = 8 * BIG / r["best_s"] / 1e9
        R["chain16M"] = r
        for name, fn in (("mul_scalar", lambda: x * 1.5), ("tanh", lambda: torch.tanh(x)),
                         ("sigmoid", lambda: torch.sigmoid(x)), ("exp", lambda: torch.exp(x))):
            r = T(fn)
            r["GBps_8B"] = 8 * BIG / r["best_s"] / 1e9
            R["op16M/" + name] = r
        del x

    if "matmul" in only:
        a, b = torch.randn(MAT, MAT), torch.randn(MAT, MAT)
        r = T(lambda: a @ b)
        r["GFLOPs"] = 2 * MAT ** 3 / r["best_s"] / 1e9
        R["matmul1024"] = r

    if "copy" in only:
        src, dst = torch.rand(BIG), torch.zeros(BIG)
        r = T(lambda: dst.copy_(src))
        r["GBps_8B"] = 8 * BIG / r["best_s"] / 1e9
        R["copy16M"] = r

    if "layout" in only:  # bench_eager's BM_TransposeCopy1024 and BM_MaskMul64K
        x = torch.randn(MAT, MAT)
        R["transpose_copy1024"] = T(lambda: x.t().contiguous())
        g, x = torch.randn(64, 16, 8, 8), torch.randn(64, 16, 8, 8)
        R["mask_mul64K"] = T(lambda: g * (x > 0))
        del g, x

    if "mlp" in only:
        torch.manual_seed(0)
        mlp = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
        opt = torch.optim.SGD(mlp.parameters(), lr=0.01)
        x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))

        def step():
            loss = torch.nn.functional.cross_entropy(mlp(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

        r = T(step)
        r["ms_per_step"] = r["best_s"] * 1e3
        R["mlp_step"] = r

    print(json.dumps(out))


if __name__ == "__main__":
    main()
