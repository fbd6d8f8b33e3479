"""Advanced indexing as model code writes it: bool masks beside slices, writes through a mask, and index tensors
on dims that are apart (torch puts their broadcast dims first). Compared with PyTorch by
tests/test_script_indexing.cpp (fixtures from make_indexing_fixtures.py)."""
import torch
import torch.nn as nn
from torch import Tensor


class Indexing(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x: Tensor, keep: Tensor, i: Tensor, j: Tensor, rows: Tensor):
        h = self.proj(x)                       # (B, T, F)
        cols = h[:, keep]                      # a 1-D mask over dim 1
        last = h[..., keep[:h.size(-1)]]       # over the last dim
        picked = h[i, :, j]                    # apart: (len(i), T)
        lifted = h[None, i, :, j]              # None first, then apart: (len(i), 1, T)
        between = h[i, 1, j]                   # an int between them: adjacent after the select
        sliced = h[:, 1:, 0][:, keep[1:]]
        y = h * 1.0
        y[y < 0.0] = 0.25                      # a mask by its form, the whole shape
        z = h + 0.0
        z[keep] = rows * 2.0                   # a mask by its dtype over the leading dim, rows of (n, T, F)
        w = h.clone()
        w[keep] = rows[0]                      # one row broadcast to every picked one
        u = h.clone()
        u[h[:, :, 0] > 0.0] = -1.0             # a 2-D mask over (B, T)
        return cols, last, picked, lifted, between, sliced, y, z, w, u
