"""raise in lowered code (a path not taken here), list + and * with a run-time count, isinstance and
conditions on constants decided while lowering: the results are torch's."""
import torch
from torch import Tensor
from typing import List


def scaled(x: Tensor, p: float, mode: str) -> Tensor:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
    if mode not in ["batch", "row"]:
        raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
    if p == 0.0:
        return x
    return x * (1.0 - p)


# CASE: constant_conditions randn(2,3)
def constant_conditions(x: Tensor) -> Tensor:
    return scaled(x, 0.25, "row") + scaled(x, 0.0, "batch")


# CASE: runtime_raise randn(2,3) 2
def runtime_raise(x: Tensor, n: int) -> Tensor:
    if n < 0:
        raise ValueError("n must not be negative")
    return x * n


# CASE: row_shape randn(4,3,2)
def row_shape(x: Tensor) -> Tensor:
    size = [x.shape[0]] + [1] * (x.ndim - 1)
    return x * torch.ones(size)


# CASE: repeat_left randn(2,3) 3
def repeat_left(x: Tensor, n: int) -> int:
    xs: List[int] = [1, 2]
    ys = n * xs
    return len(ys) + len([5] * (n - 1))


# CASE: isinstance_folds randn(2,3)
def isinstance_folds(x: Tensor) -> Tensor:
    if isinstance(x, Tensor):
        y = x * 2
    else:
        y = x
    return y
