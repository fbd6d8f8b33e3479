import torch
import torch.nn as nn
from torch import Tensor


class Contract(nn.Module):
    def __init__(self):
        super().__init__()
        self.v = nn.Parameter(torch.arange(3.0) / 3.0 - 0.3)

    def forward(self, a: Tensor, b: Tensor, m: Tensor, x: Tensor, a4: Tensor):
        y1 = torch.einsum("...ij,...jk->...ik", a, b)
        y2 = torch.einsum("bij,bjk->bik", a, b)
        y3 = torch.einsum("...ij,...jk->...ik", a, m)
        y4 = torch.einsum("...d,d->...", x, self.v)
        y5 = torch.einsum("...hd,...kd->...hk", x, x)
        y6 = torch.einsum("...ij,...jk->...ik", a4, b)
        y7 = torch.einsum("...i,...j->...ij", x, self.v)
        y8 = torch.einsum("...ij,...jk", a, m)
        loss = (y1 * y1).sum() + (y2 * 0.5).sum() + y3.sum() * 0.25 + (y4 * y4).sum() + y5.sum() + (y6 * 0.125).sum()
        loss = loss + (y7 * y7).sum() + (y8 * 2.0).sum()
        return y1, y3, y4, y5, y6, y7, y8, loss
