"""Tensor ops through the op table and composites (softmax, mean, where), indexing, mixed arithmetic."""
import torch
from torch import Tensor
from typing import Optional, Tuple


def attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    scores = q @ k.t() / 2.0
    w = torch.softmax(scores, dim=-1)
    return w @ v


def logits(x: Tensor) -> Tensor:
    return torch.log_softmax(x, 1).sum(dim=0, keepdim=True)


def slicing(x: Tensor) -> Tensor:
    return x[:, 1:3] + x[..., -1:] * x[0, :2] - x[1:, ::2].sum()


def mixed(x: Tensor, n: int, f: float) -> Tensor:
    y = x * n + f - (n // 2) * 0.5
    y = 2 ** y if n > 2 else y ** 2
    return torch.where(y > 1.0, y, -y).clamp(min=-3.0, max=3.0)


def maybe_bias(x: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    if bias is not None:
        x = x + bias
    return x.relu()


def checked(x: Tensor, n: int) -> Tensor:
    assert n > 0, "n must be positive"
    return torch.cat([x, x * n], dim=0).max(dim=0)[0]


def advanced(x: Tensor, i: Tensor, j: Tensor, t: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    # index tensors on two dims, broadcast together (torch's advanced indexing), negative ones counting from the end
    a = x[i, j]
    b = x[:, -j - 1, t]
    c = x[torch.arange(x.shape[0]), t]
    d = x[i]
    return a, b, c, d


def masked(x: Tensor, m: Tensor) -> Tuple[Tensor, Tensor]:
    # bool masks: the selected elements of x > 0, and the rows where m > 0 (a mask over x's first dim)
    return x[x > 0], x[m > 0]


# CASE: attention randn(3,4) randn(5,4) randn(5,2)
# CASE: logits randn(4,6)
# CASE: slicing randn(4,5)
# CASE: mixed randn(3) 3 0.25
# CASE: mixed randn(3) 1 -1.5
# CASE: maybe_bias randn(2,3) randn(3)
# CASE: maybe_bias randn(2,3) None
# CASE: checked randn(2,3) 2


def with_default(x: Tensor) -> Tensor:
    return maybe_bias(x) + maybe_bias(x, x * 2)


# CASE: with_default randn(3)
# CASE: advanced randn(3,4,5) randint(0,3,2,3) randint(0,4,3) randint(0,3,3)
# CASE: masked randn(4,3) randn(4)
