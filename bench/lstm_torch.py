"""PyTorch's side of bench/bench_lstm.cpp: forward and forward + backward of LSTM(64 -> 128, T=32, batch 16)
on one thread, ms of process CPU time per iteration (best of 7 runs of 10), and the word language model's
training step (best of 5 runs of 3). Run with /usr/bin/python3 (PyTorch 1.13)."""
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
lstm = torch.nn.LSTM(64, 128)
x = torch.randn(32, 16, 64)


def best_ms(f, reps=7, iters=10):
    f()
    ms = []
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(iters):
            f()
        ms.append((time.process_time() - t0) * 1000 / iters)
    return min(ms)


def fwd():
    with torch.no_grad():
        lstm(x)


def fb():
    lstm.zero_grad()
    xi = x.detach().requires_grad_()
    lstm(xi)[0].sum().backward()


print(f"torch {torch.__version__} LSTM(64->128, T=32, N=16), 1 thread: forward {best_ms(fwd):.3f} ms, "
      f"forward+backward {best_ms(fb):.3f} ms")


lm = torch.nn.Sequential(torch.nn.Embedding(2000, 256), torch.nn.LSTM(256, 256, 2), torch.nn.Linear(256, 2000))
tokens, target = torch.randint(0, 2000, (35, 20)), torch.randint(0, 2000, (35 * 20,))
opt = torch.optim.SGD(lm.parameters(), lr=0.1)


def lm_step():
    opt.zero_grad()
    out, _ = lm[1](lm[0](tokens))
    torch.nn.functional.cross_entropy(lm[2](out).flatten(0, 1), target).backward()
    opt.step()


print(f"torch word LM training step, 1 thread: eager {best_ms(lm_step, 5, 3):.2f} ms")
