"""F.embedding_bag in functions: offsets, include_last_offset, per_sample_weights, padding_idx, a 2-D input; the
bags are built when the graph runs (tests/test_embedding_bag.cpp has empty bags, which torch.arange cannot give)."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def bags(idx: Tensor, w: Tensor, psw: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    return (F.embedding_bag(idx, w, torch.arange(0, 8, 3), mode='max'),
            F.embedding_bag(idx, w, torch.arange(0, 9, 4), mode='sum', include_last_offset=True),
            F.embedding_bag(idx, w, torch.arange(0, 8, 2), per_sample_weights=psw, mode='sum'),
            F.embedding_bag(idx.view(2, 4), w, padding_idx=2))


# CASE: bags randint(0,10,8) randn(10,3) randn(8)
