"""F.adaptive_avg_pool2d / F.adaptive_max_pool2d, batched and unbatched: to one value per channel (a
reduction), to sizes that divide the input's and to bins that overlap (their bounds computed when the graph
runs: the input's shape is not known when lowering). None entries are not TorchScript: tests/test_activations.cpp
covers them."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def global_pools(x: Tensor) -> Tuple[Tensor, Tensor]:
    return F.adaptive_avg_pool2d(x, 1), F.adaptive_max_pool2d(x, (1, 1))


def head(x: Tensor, w: Tensor) -> Tensor:
    # ResNet's head: pool, flatten, linear
    return F.linear(torch.flatten(F.adaptive_avg_pool2d(x, [1, 1]), 1), w)


def sized(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    return F.adaptive_avg_pool2d(x, (3, 2)), F.adaptive_max_pool2d(x, (3, 2)), F.adaptive_avg_pool2d(x, 4), F.adaptive_max_pool2d(x, [2, 1])


# CASE: global_pools randn(2,3,5,7)
# CASE: global_pools randn(3,4,6)
# CASE: sized randn(2,3,7,5)
# CASE: sized randn(2,3,6,4)
# CASE: sized randn(3,9,10)
# CASE: sized randn(1,2,3,3)
# CASE: head randn(2,3,5,5) randn(4,3)
