"""F.pixel_shuffle / F.pixel_unshuffle against PyTorch (an ESPCN-style upsampler's last step), batched with
r = 2 and 3; F.dropout2d in evaluation is the identity."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def shuffles(x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    y = F.pixel_shuffle(x, 2)
    return y, F.pixel_unshuffle(y * 2.0, 2), F.dropout2d(torch.tanh(y), 0.5, False)


def by_three(x: Tensor) -> Tensor:
    return torch.sigmoid(F.pixel_shuffle(x, 3))


# CASE: shuffles randn(2,8,3,5)
# CASE: shuffles randn(1,4,2,2)
# CASE: by_three randn(2,9,2,3)
