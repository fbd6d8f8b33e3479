"""F.max_pool2d / F.avg_pool2d with ceil_mode (the last window hanging over the input's edge),
count_include_pad=False and divisor_override, batched and unbatched, against PyTorch."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def ceil_pools(x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    return F.max_pool2d(x, 2, ceil_mode=True), F.max_pool2d(x, 3, 2, 1, 1, True), F.avg_pool2d(x, 3, 2, 1, True)


def avg_modes(x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    a = F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)
    b = F.avg_pool2d(x, (3, 2), (2, 3), (1, 1), ceil_mode=True, count_include_pad=False)
    return a, b, F.avg_pool2d(x, 2, ceil_mode=True, divisor_override=3)


def inception_stem(x: Tensor) -> Tensor:
    # torchvision's GoogLeNet / SqueezeNet: max_pool2d(3, 2, ceil_mode=True) after a relu
    return F.max_pool2d(torch.relu(x), 3, 2, ceil_mode=True) * 2.0


# CASE: ceil_pools randn(2,3,7,6)
# CASE: ceil_pools randn(3,5,9)
# CASE: avg_modes randn(2,3,7,6)
# CASE: avg_modes randn(2,5,5)
# CASE: inception_stem randn(1,4,8,10)
