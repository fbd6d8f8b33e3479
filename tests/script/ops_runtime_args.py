"""Ops whose arguments or results lowering cannot fix as constants: F.interpolate to a size read from another
tensor, the named fields of topk / sort / max / min / median / kthvalue, F.one_hot without num_classes, and
torch.einsum with three operands written out."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def upsample_to(x: Tensor, skip: Tensor) -> Tensor:
    a = F.interpolate(x, size=skip.shape[2:])
    b = F.interpolate(x, size=skip.shape[2:], mode="bilinear", align_corners=False)
    h, w = skip.size(2), skip.size(3)
    c = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=True)
    return torch.cat([a, b, c], dim=1) + skip


def upsample_square(x: Tensor, n: int) -> Tensor:
    return F.interpolate(x, size=n, mode="bilinear")


def named_fields(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    t = torch.topk(x, 2, dim=1)
    s = x.sort(dim=0, descending=True)
    m = x.max(dim=1)
    n = torch.min(x, 0, keepdim=True)
    values, indices = x.topk(1)
    return t.values, t.indices, s.values, s[1], m.values + m[0], m.indices, n.values, n.indices, values, indices


def order_statistics(x: Tensor, k: int) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    med = torch.median(x, dim=1)
    kth = x.kthvalue(k, 0, keepdim=True)
    return med.values, med.indices, kth.values, kth.indices, x.median(), torch.median(x, -1, True)[0]


def one_hot_inferred(x: Tensor) -> Tensor:
    return F.one_hot(x) * 2 + F.one_hot(x, -1)


def einsum_many(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    return torch.einsum("ij,jk,kl->il", a, b, c)


# CASE: upsample_to randn(2,3,4,5) randn(2,9,7,11)
# CASE: upsample_to randn(1,3,6,6) randn(1,9,3,2)
# CASE: upsample_square randn(1,2,3,4) 5
# CASE: named_fields randn(4,5)
# CASE: order_statistics randn(5,4) 2
# CASE: order_statistics randn(4,3) 4
# CASE: one_hot_inferred randint(0,6,3,4)
# CASE: einsum_many randn(2,3) randn(3,4) randn(4,5)
