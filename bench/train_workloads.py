#!/usr/bin/env python3
"""Training steps beside kiln's compiled training (bench/compare_train): the MLP 784-256-10 and the
digits CNN (conv 1->16, pool, conv 16->32, pool, linear 128->10), batch 64, cross-entropy, Adam
(lr 1e-3), one step = forward, loss, backward, optimizer step.
  --fw torch       PyTorch eager (and, with --compile, torch.compile of the whole step: Inductor compiles
                   forward and backward through AOTAutograd; the optimizer step is compiled too)
  --fw jax         jax.jit of value_and_grad plus an Adam update written in jax.numpy, one jitted step
  --bf16           with --fw torch: also the eager step with forward and loss under
                   torch.autocast("cpu", dtype=torch.bfloat16) (kiln's BM_*StepBf16), as <name>_bf16_s
Prints JSON: per workload the best per-step time over `reps` timed batches, and the first call's
time (compile included). A framework that is not installed is reported as missing.

Usage: train_workloads.py --fw torch|jax --threads N [--reps R] [--compile] [--bf16]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sota_workloads import first_call, timed  # noqa: E402  (one timing loop for every comparison)


def torch_steps(threads, reps, compile_too, bf16=False):
    import torch
    import torch.nn as nn
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    out = {"torch_version": torch.__version__}

    def models():
        mlp = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
        cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                            nn.Linear(128, 10))
        return {"mlp": (mlp, torch.randn(64, 784)), "cnn": (cnn, torch.randn(64, 1, 8, 8))}

    y = torch.randint(0, 10, (64,))
    for name, (model, x) in models().items():
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        out[name + "_eager_s"] = timed(step, reps)
        if bf16:
            model3, x3 = models()[name]
            opt3 = torch.optim.Adam(model3.parameters(), lr=1e-3)

            def bstep():
                opt3.zero_grad(set_to_none=True)
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = nn.functional.cross_entropy(model3(x3), y)
                loss.backward()
                opt3.step()
                return loss

            out[name + "_bf16_s"] = timed(bstep, reps)
        if compile_too and hasattr(torch, "compile"):
            model2, x2 = models()[name]
            opt2 = torch.optim.Adam(model2.parameters(), lr=1e-3)

            @torch.compile
            def fwd_loss(xb, yb):
                return nn.functional.cross_entropy(model2(xb), yb)

            @torch.compile
            def opt_step():
                opt2.step()

            def cstep():
                opt2.zero_grad(set_to_none=True)
                loss = fwd_loss(x2, y)
                loss.backward()
                opt_step()
                return loss

            out[name + "_compile_first_s"] = first_call(cstep)
            out[name + "_compile_s"] = timed(cstep, reps)
    return out


def jax_steps(threads, reps):
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} "
                                       f"intra_op_parallelism_threads={threads}")
    import jax
    import jax.numpy as jnp
    out = {"jax_version": jax.__version__}
    key = jax.random.PRNGKey(0)

    def dense(k, i, o):
        b = 1 / i ** 0.5
        return {"w": jax.random.uniform(k, (i, o), minval=-b, maxval=b), "b": jnp.zeros(o)}

    def conv(k, ci, co):
        b = 1 / (ci * 9) ** 0.5
        return {"w": jax.random.uniform(k, (co, ci, 3, 3), minval=-b, maxval=b), "b": jnp.zeros(co)}

    def conv_apply(p, x):
        y = jax.lax.conv_general_dilated(x, p["w"], (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + p["b"][None, :, None, None]

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    ks = jax.random.split(key, 6)
    mlp = [dense(ks[0], 784, 256), dense(ks[1], 256, 10)]
    cnn = [conv(ks[2], 1, 16), conv(ks[3], 16, 32), dense(ks[4], 128, 10)]

    def mlp_apply(p, x):
        h = jax.nn.relu(x @ p[0]["w"] + p[0]["b"])
        return h @ p[1]["w"] + p[1]["b"]

    def cnn_apply(p, x):
        h = pool(jax.nn.relu(conv_apply(p[0], x)))
        h = pool(jax.nn.relu(conv_apply(p[1], h)))
        h = h.reshape(h.shape[0], -1)
        return h @ p[2]["w"] + p[2]["b"]

    y = jax.random.randint(ks[5], (64,), 0, 10)
    for name, params, apply, x in (("mlp", mlp, mlp_apply, jax.random.normal(ks[0], (64, 784))),
                                   ("cnn", cnn, cnn_apply, jax.random.normal(ks[1], (64, 1, 8, 8)))):
        def loss_fn(p, x, y, apply=apply):
            logits = apply(p, x)
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

        @jax.jit
        def step(p, m, v, t, x, y, loss_fn=loss_fn):
            loss, g = jax.value_and_grad(loss_fn)(p, x, y)
            t = t + 1
            m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
            v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
            bc1, bc2 = 1 - 0.9 ** t, 1 - 0.999 ** t
            p = jax.tree_util.tree_map(lambda p, m, v: p - 1e-3 * (m / bc1) / (jnp.sqrt(v / bc2) + 1e-8), p, m, v)
            return p, m, v, t, loss

        state = [params, jax.tree_util.tree_map(jnp.zeros_like, params), jax.tree_util.tree_map(jnp.zeros_like, params),
                 jnp.array(0.0)]

        def run():
            state[0], state[1], state[2], state[3], loss = step(*state, x, y)
            loss.block_until_ready()

        out[name + "_jit_first_s"] = first_call(run)
        out[name + "_jit_s"] = timed(run, reps)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fw", choices=["torch", "jax"], required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--bf16", action="store_true")
    a = ap.parse_args()
    try:
        r = torch_steps(a.threads, a.reps, a.compile, a.bf16) if a.fw == "torch" else jax_steps(a.threads, a.reps)
    except ImportError as e:
        r = {"missing": str(e)}
    json.dump(r, sys.stdout)
    print()


if __name__ == "__main__":
    main()
