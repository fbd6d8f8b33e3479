import torch
from torch import Tensor

BIAS = 0.25


def shift(x: Tensor, by: float) -> Tensor:
    # reads its own file's constant and calls its own file's helper
    return half(x) + by + BIAS


def half(x):
    return x * 0.5
