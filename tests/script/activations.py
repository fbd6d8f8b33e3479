"""torch.nn.functional's activations, scaled by 30 so that exp would overflow in float32 where a formula
lets it (the composites keep every exp's argument <= 0)."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def exp_family(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    x = x * 30.0
    return F.elu(x), F.elu(x, 0.5), F.selu(x), F.celu(x, alpha=2.0), F.leaky_relu(x) + F.leaky_relu(x, 0.2)


def soft_family(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    x = x * 30.0
    return F.softplus(x), F.softplus(x, 2.0, 10.0), F.softplus(x, beta=-0.5, threshold=5.0), F.mish(x), F.logsigmoid(x), F.softsign(x)


def hard_family(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    x = x * 4.0
    return F.hardtanh(x), F.hardtanh(x, -2.0, 2.5), F.relu6(x), F.hardsigmoid(x), F.hardswish(x)


def inplace_flags(x: Tensor) -> Tensor:
    # a temporary updated in place is the out-of-place result: kiln computes it out of place
    y = F.leaky_relu(x * 2.0, 0.1, inplace=True) + F.elu(x * 3.0, inplace=True) + F.relu6(x * 5.0, inplace=True)
    return y + F.silu(x * 30.0, inplace=False) + F.hardswish(x + 1.0, inplace=True) + F.mish(x - 1.0, False)


# CASE: exp_family randn(4,5)
# CASE: soft_family randn(4,5)
# CASE: hard_family randn(4,5)
# CASE: inplace_flags randn(3,4)
