"""break and continue, in for and while loops, lowered with flags carried through the loop."""
import torch
from torch import Tensor
from typing import Tuple


def first_big(x: Tensor, threshold: float) -> int:
    idx = -1
    for i in range(x.shape[0]):
        if x[i] > threshold:
            idx = i
            break
    return idx


def skip_negative_rows(x: Tensor) -> Tensor:
    acc = torch.zeros_like(x[0])
    for i in range(x.size(0)):
        row = x[i]
        if row.sum() < 0:
            continue
        acc = acc + row
    return acc


def grow(x: Tensor) -> Tuple[Tensor, int]:
    steps = 0
    while True:
        x = x * 1.5
        steps += 1
        if bool(x.abs().sum() > 100.0) or steps >= 50:
            break
    return x, steps


def odd_sum(n: int) -> int:
    total = 0
    i = 0
    while i < n:
        i += 1
        if i % 2 == 0:
            continue
        if i > 15:
            break
        total += i
    return total


# CASE: first_big randn(8) 1.0
# CASE: first_big randn(3) 10.0
# CASE: skip_negative_rows randn(6,3)
# CASE: grow randn(4)
# CASE: odd_sum 10
# CASE: odd_sum 40
