"""Bool masks inside an index tuple beside ints and slices (x[mask, 0], x[0, mask], x[:, mask], x[mask, 1:]), read and
written, as PyTorch indexes."""
import torch
from torch import Tensor
from typing import Tuple


def mask_reads(x: Tensor, r: Tensor, c: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    rows = r > 0.5
    cols = c > 0.5
    return x[rows, 0], x[0, cols], x[:, cols], x[rows, 1:]


def mask_writes(x: Tensor, r: Tensor, c: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    rows = r > 0.5
    cols = c > 0.5
    a = x.clone()
    a[rows, 0] = -1.0
    b = x.clone()
    b[0, cols] = x[1, cols] * 2.0
    d = x.clone()
    d[:, cols] = -3.0
    return a, b, d


# CASE: mask_reads randn(5,4) rand(5) rand(4)
# CASE: mask_writes randn(5,4) rand(5) rand(4)
