# error: 7:12: function 'f' is declared to return Tensor but returns Tuple[Tensor, int]
import torch
from typing import Tuple


def f(x: torch.Tensor) -> torch.Tensor:
    return x, 1
