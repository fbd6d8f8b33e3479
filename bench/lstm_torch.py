"""PyTorch's side of bench/bench_lstm.cpp: forward and forward + backward of LSTM(64 -> 128, T=32, batch 16)
on one thread, ms of process CPU time per iteration (best of 7 runs of 10). Run with /usr/bin/python3 (PyTorch 1.13)."""
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
