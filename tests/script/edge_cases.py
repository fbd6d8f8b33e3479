"""Exits inside unrolled tuple loops and inside inlined callees, chained comparisons, int folding."""
import torch
from torch import Tensor
from typing import Tuple


def first_positive(x: Tensor) -> Tensor:
    for t in (x - 1.0, x, x + 1.0):
        if bool(t.sum() > 0):
            return t
    return x * 0.0


def until_big(x: Tensor) -> Tuple[Tensor, int]:
    n = 0
    for t in (x, x * 2.0, x * 4.0, x * 8.0):
        n += 1
        if bool(t.abs().sum() > 6.0):
            return x, n
        x = x + t
    return x, n


def clamp_steps(k: int) -> int:
    steps = 0
    for i in range(k):
        steps = steps + inner_steps(i)
    return steps


def inner_steps(i: int) -> int:
    j = 0
    while True:
        if j * j >= i:
            return j
        j += 1
    return -1


def in_window(n: int, lo: int, hi: int) -> bool:
    return lo <= n < hi and not n == 5


def folded(x: Tensor) -> Tensor:
    k = 2 * 4 - 7 // 2
    return x.softmax(k - 5) * k


# CASE: first_positive randn(3)
# CASE: first_positive randn(30)
# CASE: until_big randn(3)
# CASE: until_big rand(8)
# CASE: clamp_steps 9
# CASE: in_window 4 0 10
# CASE: in_window 5 0 10
# CASE: in_window 12 0 10
# CASE: folded randn(2,3,4)
