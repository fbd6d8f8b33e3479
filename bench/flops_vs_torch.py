"""kiln's FLOPs for the digits MLP and CNN beside torch.utils.flop_counter.FlopCounterMode's.

torch counts only matmul-like ops (mm, addmm, bmm, convolution and their backward), 2 per
multiply-add and without bias adds; kiln counts every op. So the comparison sets torch's total beside
kiln's matmul + conv rows (conv2d, conv2d_backward_input, conv2d_backward_weight), which must be equal,
and prints kiln's total (elementwise, reductions, pools too) for information.

    ~/.cache/kiln-sota-venv/bin/python bench/flops_vs_torch.py build/bench/flops_digits

Needs PyTorch 2.x (FlopCounterMode); Debian's torch 1.13 lacks it. Exits 1 on a mismatch.
"""
import json
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

MATMUL_CONV = ("matmul", "conv2d", "conv2d_backward_input", "conv2d_backward_weight")


def digits_mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def digits_cnn():
    return nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, 1, 1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 2 * 2, 10))


def torch_flops(model, x, backward):
    labels = torch.randint(0, 10, (x.shape[0],))
    with FlopCounterMode(display=False) as counter:
        loss = F.cross_entropy(model(x), labels)
        if backward:
            loss.backward()
    by_op = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    return counter.get_total_flops(), by_op


def main():
    kiln = json.loads(subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout)
    torch.manual_seed(0)
    models = {"mlp": (digits_mlp(), torch.randn(32, 64)), "cnn": (digits_cnn(), torch.randn(32, 1, 8, 8))}
    ok = True
    print(f"torch {torch.__version__}; batch 32")
    print(f"{'model':<6}{'pass':<18}{'torch (mm+conv)':>16}{'kiln mm+conv':>14}{'kiln all ops':>14}  torch by op")
    for name, (model, x) in models.items():
        for phase, backward in (("forward", False), ("forward_backward", True)):
            total, by_op = torch_flops(model, x, backward)
            k = kiln[name][phase]
            ours = sum(k.get(op, 0) for op in MATMUL_CONV)
            ok &= ours == total
            mark = "" if ours == total else "  MISMATCH"
            print(f"{name:<6}{phase:<18}{total:>16,}{ours:>14,}{k['total']:>14,}  {by_op}{mark}")
    print("equal" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
