"""What lowering cannot know as constants: shapes, slice bounds and lists built at run time, any-rank
transpose and flatten, item(), `in`, and torch.nn.functional."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import List


def factories(x: Tensor, n: int) -> Tensor:
    z = torch.zeros(n, x.shape[1])
    o = torch.ones([n, x.shape[1]], dtype=torch.float32)
    f = torch.full((x.shape[0], 1), 0.5)
    return torch.cat([x + f, z + o], dim=0)


def grow(x: Tensor, n: int) -> Tensor:
    parts: List[Tensor] = []
    for i in range(n):
        parts.append(x * float(i))
    return torch.cat(parts, dim=1) + torch.stack(parts, dim=0).sum(0).sum(1, keepdim=True)


def window(x: Tensor, start: int, width: int) -> Tensor:
    return x[:, start:start + width] * x[start:, :width].sum()


def heads(x: Tensor, nhead: int) -> Tensor:
    B, T, C = x.shape
    h = x.view(B, T, nhead, C // nhead).transpose(1, 2)
    scores = h @ h.transpose(-2, -1)
    return torch.flatten(F.softmax(scores, dim=-1), 2) + torch.flatten(h, 0, 1).sum()


def numbers(x: Tensor, k: int) -> float:
    s = x.sum().item()
    if k in (1, 3, 5):
        s = s * 2.0
    if k not in [2, 4]:
        s = s + 1.0
    return s


def activations(x: Tensor) -> Tensor:
    return F.gelu(x) + F.gelu(x, approximate="tanh") + F.dropout(x, 0.5, False) + F.silu(x)


# CASE: factories randn(2,3) 4
# CASE: grow randn(3,2) 3
# CASE: window randn(4,6) 1 3
# CASE: heads randn(2,3,8) 2
# CASE: numbers randn(3,3) 3
# CASE: numbers randn(3,3) 2
# CASE: activations randn(3,4)
