"""F.conv_transpose2d against PyTorch: a DCGAN generator's upsampling block, output_padding with groups,
dilation, unbatched input; the output's size comes from the input's when the graph runs."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def dcgan_block(z: Tensor, w1: Tensor, w2: Tensor) -> Tensor:
    h = torch.relu(F.conv_transpose2d(z, w1, None, 1, 0))
    return torch.tanh(F.conv_transpose2d(h, w2, stride=2, padding=1))


def geometry(x: Tensor, w: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    a = F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2)
    c = F.conv_transpose2d(x, w, None, (3, 2), (2, 1), (2, 1), 2, (2, 1))
    return a, c


# CASE: dcgan_block randn(2,8,1,1) randn(8,4,4,4) randn(4,3,4,4)
# CASE: geometry randn(2,4,3,5) randn(4,3,3,3) randn(6)
# CASE: geometry randn(4,4,4) randn(4,3,3,3) randn(6)
