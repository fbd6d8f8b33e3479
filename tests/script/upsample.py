"""F.interpolate against PyTorch with an integer scale_factor (what a script graph of unknown
shape takes): nearest and bilinear (align_corners False), one factor for both dims or a pair."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def ups(x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    a = F.interpolate(x, scale_factor=2.0)
    b = F.interpolate(x, scale_factor=(2.0, 3.0), mode="bilinear", align_corners=False)
    c = F.interpolate(torch.tanh(x), scale_factor=3.0, mode="bilinear")
    return a, b, c


def nearest_pair(x: Tensor) -> Tensor:
    return torch.sigmoid(F.interpolate(x, scale_factor=(3.0, 1.0), mode="nearest"))


# CASE: ups randn(2,3,4,5)
# CASE: ups randn(1,2,1,3)
# CASE: nearest_pair randn(2,1,3,2)
