# error: 9:12: cannot add Tensor and Tuple[Tensor, Tensor]
import torch
from torch import Tensor
from typing import Tuple


def f(x: Tensor) -> Tensor:
    t = (x, x)
    return x + t
