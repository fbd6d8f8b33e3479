"""Loops whose trip count depends on tensor values: prim::Loop with a condition re-evaluated per trip."""
import torch
from torch import Tensor
from typing import Tuple


def halve_until_small(x: Tensor, limit: float) -> Tensor:
    while x.abs().max() > limit:
        x = x / 2
    return x


def count_steps(x: Tensor) -> int:
    n = 0
    while bool(x.sum() > 0.1):
        x = x * 0.5
        n += 1
    return n


def newton_sqrt(a: Tensor, tol: float) -> Tuple[Tensor, int]:
    y = a
    it = 0
    while bool((y * y - a).abs().max() > tol) and it < 100:
        y = (y + a / y) * 0.5
        it = it + 1
    return y, it


# CASE: halve_until_small randn(3,4) 0.25
# CASE: halve_until_small randn(5) 4.0
# CASE: count_steps rand(3,4)
# CASE: newton_sqrt rand(6) 0.0001
