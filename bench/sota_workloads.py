#!/usr/bin/env python3
"""The state of the art beside kiln's JIT, in one run: torch.compile (PyTorch 2.x, Inductor's CPU
backend) and jax.jit on the 8-op chain (16M float32) and the MLP forward (784-256-10, batch 64).
Prints JSON: per workload the best run time of `reps` timed batches and the first call's time
(compile included). Runs under the virtualenv bench/compare creates (KILN_SOTA_VENV); a framework
that is not installed is reported as missing, not as a failure.

Usage: sota_workloads.py --threads N [--reps R]
"""
import argparse
import json
import os
import sys
import time


def timed(fn, reps=5, min_time=0.25):
    best = float("inf")
    for _ in range(reps):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= min_time:
                break
        best = min(best, dt / n)
    return best


def first_call(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def torch_compile(threads, reps, R):
    try:
        import torch
    except ImportError as e:
        R["torch_compile"] = {"missing": str(e)}
        return
    torch.set_num_threads(threads)
    out = {"version": torch.__version__}

    def chain(x):
        return torch.sigmoid(torch.tanh(x * 1.5 + 0.5) * x) + torch.exp(x) * 0.1 - x

    x = torch.randn(1 << 24)
    c = torch.compile(chain)
    out["chain16M_first_s"] = first_call(lambda: c(x))
    out["chain16M_s"] = timed(lambda: c(x), reps)
    mlp = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    xm = torch.randn(64, 784)
    with torch.no_grad():
        out["mlp_forward_eager_s"] = timed(lambda: mlp(xm), reps)
        cm = torch.compile(mlp)
        out["mlp_forward_first_s"] = first_call(lambda: cm(xm))
        out["mlp_forward_s"] = timed(lambda: cm(xm), reps)
    R["torch_compile"] = out


def jax_jit(threads, reps, R):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        R["jax_jit"] = {"missing": str(e)}
        return
    out = {"version": jax.__version__}

    def chain(x):
        return jax.nn.sigmoid(jnp.tanh(x * 1.5 + 0.5) * x) + jnp.exp(x) * 0.1 - x

    x = jax.random.normal(jax.random.PRNGKey(0), (1 << 24,), dtype=jnp.float32)
    c = jax.jit(chain)
    out["chain16M_first_s"] = first_call(lambda: c(x).block_until_ready())
    out["chain16M_s"] = timed(lambda: c(x).block_until_ready(), reps)
    k = jax.random.split(jax.random.PRNGKey(1), 3)
    w1 = jax.random.normal(k[0], (784, 256), dtype=jnp.float32) * 0.03
    w2 = jax.random.normal(k[1], (256, 10), dtype=jnp.float32) * 0.06
    b1, b2 = jnp.zeros(256, jnp.float32), jnp.zeros(10, jnp.float32)
    xm = jax.random.normal(k[2], (64, 784), dtype=jnp.float32)
    mlp = jax.jit(lambda x: jnp.maximum(x @ w1 + b1, 0) @ w2 + b2)
    out["mlp_forward_first_s"] = first_call(lambda: mlp(xm).block_until_ready())
    out["mlp_forward_s"] = timed(lambda: mlp(xm).block_until_ready(), reps)
    R["jax_jit"] = out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    R = {"threads": a.threads, "python": sys.version.split()[0]}
    torch_compile(a.threads, a.reps, R)
    jax_jit(a.threads, a.reps, R)
    json.dump(R, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
