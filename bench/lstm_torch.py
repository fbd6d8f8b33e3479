"""PyTorch's side of bench/bench_lstm.cpp: forward and forward + backward of LSTM(64 -> 128, T=32, batch 16), ms per
iteration (best of 7 runs of 10), and the word language model's training step (best of 5 runs of 3) on the model
file bench_lstm scripts (tests/script/models/word_lm.py), eager and, with --compile, torch.compile'd. At one thread the time is process CPU time, at more threads wall time, as bench_lstm.
Runs under Debian's PyTorch 1.13 (/usr/bin/python3) or a 2.x virtualenv (--compile needs 2.x).
Usage: lstm_torch.py [--threads N] [--lm-only] [--compile]"""
import argparse
import importlib.util
import os
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--lm-only", action="store_true")
ap.add_argument("--compile", action="store_true")
args = ap.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(0)
clock = time.process_time if args.threads == 1 else time.perf_counter


def best_ms(f, reps=7, iters=10):
    f()
    ms = []
    for _ in range(reps):
        t0 = clock()
        for _ in range(iters):
            f()
        ms.append((clock() - t0) * 1000 / iters)
    return min(ms)


if not args.lm_only:
    lstm = torch.nn.LSTM(64, 128)
    x = torch.randn(32, 16, 64)

    def fwd():
        with torch.no_grad():
            lstm(x)

    def fb():
        lstm.zero_grad()
        xi = x.detach().requires_grad_()
        lstm(xi)[0].sum().backward()

    print(f"torch {torch.__version__} LSTM(64->128, T=32, N=16), {args.threads} thread(s): forward "
          f"{best_ms(fwd):.3f} ms, forward+backward {best_ms(fb):.3f} ms")


# The model file bench_lstm scripts, imported from its path: word_language_model's RNNModel, trained as its train()
# does, each batch from init_hidden's zero state, NLLLoss on the log-probabilities.
spec = importlib.util.spec_from_file_location(
    "word_lm", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "script", "models", "word_lm.py"))
word_lm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(word_lm)
lm = word_lm.RNNModel("LSTM", 2000, 256, 256, 2, 0.0)
tokens, target = torch.randint(0, 2000, (35, 20)), torch.randint(0, 2000, (35 * 20,))
opt = torch.optim.SGD(lm.parameters(), lr=0.1)


def lm_loss(tokens, target):
    output, _ = lm(tokens, lm.init_hidden(20))
    return torch.nn.functional.nll_loss(output, target)


def step_with(loss_fn):
    def step():
        opt.zero_grad()
        loss_fn(tokens, target).backward()
        opt.step()
    return step


line = f"torch {torch.__version__} word LM training step (word_lm.py), {args.threads} thread(s): eager {best_ms(step_with(lm_loss), 5, 3):.2f} ms"
if args.compile:
    compiled = torch.compile(lm_loss)
    step = step_with(compiled)
    for _ in range(3):  # compile and settle outside the timing
        step()
    line += f", torch.compile {best_ms(step, 5, 3):.2f} ms"
print(line)
