"""Nested for-range loops carrying tensors and ints, with start/stop/step forms of range()."""
import torch
from torch import Tensor


def nested(x: Tensor, n: int, m: int) -> Tensor:
    acc = torch.zeros_like(x)
    for i in range(n):
        for j in range(m):
            acc = acc + x * (i + j)
    return acc


def triangle(n: int) -> int:
    total = 0
    for i in range(n):
        for j in range(i, n, 2):
            total += i * j
    return total


def countdown(x: Tensor, n: int) -> Tensor:
    for k in range(n, 0, -3):
        x = x * 0.5 + k
    return x


def rows(x: Tensor) -> Tensor:
    acc = torch.zeros_like(x[0])
    for r in x:
        acc = acc + r * r
    return acc


# CASE: nested randn(2,3) 3 4
# CASE: nested randn(4) 0 2
# CASE: triangle 7
# CASE: triangle 0
# CASE: countdown randn(3) 10
# CASE: rows randn(4,3)
