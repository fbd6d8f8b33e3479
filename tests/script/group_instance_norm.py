"""F.group_norm and F.instance_norm against PyTorch, over (N, C, H, W), (N, C, L) and (N, C) inputs whose
shapes the script graph learns only when it runs."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def group(x: Tensor, w: Tensor, b: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    return F.group_norm(x, 2, w, b), F.group_norm(x, 1), F.group_norm(x * 3.0, 4, eps=0.1)


def instance(x: Tensor, w: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    return F.instance_norm(x), F.instance_norm(x * 2.0 + 1.0, weight=w, bias=b, eps=1e-3)


# CASE: group randn(2,4,3,5) randn(4) randn(4)
# CASE: group randn(3,4,7) randn(4) randn(4)
# CASE: group randn(5,4) randn(4) randn(4)
# CASE: instance randn(2,4,3,5) randn(4) randn(4)
# CASE: instance randn(3,4,7) randn(4) randn(4)
