"""Tuple returns and unpacking, loops over tuples, and calls between the file's functions (inlined)."""
import torch
from torch import Tensor
from typing import Dict, Tuple


def stats(x: Tensor) -> Tuple[Tensor, Tensor]:
    return x.mean(dim=1), x.amax(dim=1)


def normalize(x: Tensor) -> Tensor:
    m, mx = stats(x)
    return (x - m.unsqueeze(1)) / (mx.unsqueeze(1).abs() + 1.0)


def fib(a: Tensor, b: Tensor, n: int) -> Tuple[Tensor, Tensor]:
    for _ in range(n):
        a, b = b, a + b
    return a, b


def through_tuple(x: Tensor) -> Tensor:
    acc = x
    for t in (x, x * 2, x.relu()):
        acc = acc + t
    return acc


def uses_later(x: Tensor) -> Tensor:
    return helper(x, 3) + 1


def helper(x: Tensor, k: int) -> Tensor:
    y = x
    for i in range(k):
        y = torch.tanh(y) + i
    return y


def weighted(d: Dict[str, Tensor], scale: float) -> Tensor:
    s = d["a"] * scale
    for k, v in d.items():
        if k != "a":
            s = s + v.sum()
    if "c" in d:
        s = s * 10.0
    return s


def dict_argument(x: Tensor, y: Tensor) -> Tensor:
    return weighted({"a": x, "b": y}, 2.0) + weighted({"b": y * 2.0, "a": x, "c": x}, 1.0)


# CASE: stats randn(3,4)
# CASE: normalize randn(3,5)
# CASE: fib randn(2) randn(2) 6
# CASE: through_tuple randn(2,2)
# CASE: uses_later randn(3)
# CASE: dict_argument randn(3) randn(2,2)
