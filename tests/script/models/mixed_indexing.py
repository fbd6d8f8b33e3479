"""Advanced indexing that mixes kinds of index, as torch reads it: an integer tensor after '...', a 2-D mask beside
other indices, a mask beside an index tensor (the mask stands for its nonzero() positions), and writes through an
integer index tensor (also after ':' or '...', and beside ints and slices, which torch applies first as a view),
through a mask after ':' or beside an int, and with a value of another dtype. Compared with PyTorch by
tests/test_script_indexing.cpp (fixtures from make_indexing_fixtures.py)."""
import torch
import torch.nn as nn
from torch import Tensor


class Mixed(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x: Tensor, keep: Tensor, grid: Tensor, i: Tensor, rows: Tensor):
        h = self.proj(x)                       # (B, T, F), B = T = F
        last = h[..., i]                       # (B, T, len(i))
        inner = h[..., i, :]                   # (B, len(i), F)
        grid_then_int = h[grid, 1]             # a 2-D mask over (B, T), then an int: (n,)
        after_slice = h[:, grid]               # a 2-D mask over (T, F): (B, n)
        mask_and_ints = h[keep, i[:1]]         # keep's positions broadcast with i[:1]: (sum(keep), F)
        grid_and_ints = h[grid, i[1:]]         # (n,)
        y = h.clone()
        y[i] = rows                            # index_put_ of rows (len(i), T, F)
        y2 = h.clone()
        y2[i] = 0.5
        z = h.clone()
        z[:, keep] = h[:, keep] * 2.0          # a mask after ':'
        u = h.clone()
        u[..., keep] = -1.0
        counts = torch.zeros(h.size(0), h.size(1), dtype=torch.long)
        counts[grid] = keep.sum() * 2.5        # a 0-d float written into int64: cast (truncated) as torch does
        w = h.clone()
        w[:, keep] = i.sum()                   # a 0-d int64 written into float32
        cols = h.clone()
        cols[:, i] = rows.transpose(0, 1)      # an index tensor after ':' (B, len(i), F), B = T
        ends = h.clone()
        ends[..., i] = 0.25                    # after '...'
        first = h.clone()
        first[0, i] = rows[0, :2]              # beside an int: h[0][i] = v
        mid = h.clone()
        mid[1:3, i] = rows[:, :2].transpose(0, 1)  # beside a slice: (2, len(i), F)
        masked = h.clone()
        masked[0, keep] = -2.0                 # a mask beside an int
        picked = h.clone()
        picked[i, 1] = rows[:, 0]              # an int after the index tensor: h[:, 1][i] = v
        pairs = i.view(2, 1)
        deep = h.clone()
        deep[:, pairs] = rows[:, :1, :1]       # a 2-D index after ':', v broadcast to (B, 2, 1, F)
        tail = h.clone()
        tail[..., 0, i] = 3.0                  # '...', an int, the index tensor
        return (last, inner, grid_then_int, after_slice, mask_and_ints, grid_and_ints, y, y2, z, u, counts, w,
                cols, ends, first, mid, masked, picked, deep, tail)
