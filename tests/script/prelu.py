"""F.prelu with one slope and with one per channel (dim 1), over inputs of rank 1 to 4."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def per_channel(x: Tensor, w: Tensor) -> Tuple[Tensor, Tensor]:
    return F.prelu(x, w), torch.prelu(x * 3.0, w * w)


def one_slope(x: Tensor, w: Tensor) -> Tensor:
    return F.prelu(x, w) + F.prelu(x * 2.0, w[0])


# CASE: per_channel randn(2,3,4,5) randn(3)
# CASE: per_channel randn(4,3) randn(3)
# CASE: per_channel randn(2,3,5) randn(3)
# CASE: one_slope randn(2,3,4) randn(1)
