from typing import Tuple

import torch
import torch.nn as nn
from torch import Tensor


def contract(a: Tensor, b: Tensor, m: Tensor, x: Tensor, p: Tensor, q: Tensor, a4: Tensor,
             w: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """einsum forms whose '...' needs the operands' ranks, which a script does not know when it is lowered."""
    y1 = torch.einsum("...ij,...jk->ik", a, b)
    y2 = torch.einsum("b...d,bkd->b...k", x, a)
    y3 = torch.einsum("...ij,jk,...k->...i", a, m, w)
    y4 = torch.einsum("i...j,i...j->i...", p, q)
    y5 = torch.einsum("a...b->ba", a4)
    y6 = torch.einsum("...ij,jk,kl->...il", a, m, w)
    loss = (y1 * y1).sum() + (y2 * 0.5).sum() + (y3 * y3).sum() + (y4 * y4).sum() * 0.25 + (y5 * y5).sum()
    loss = loss + (y6 * 2.0).sum()
    return y1, y2, y3, y4, y5, y6, loss


def loss_of(a: Tensor, b: Tensor, m: Tensor, x: Tensor, p: Tensor, q: Tensor, a4: Tensor, w: Tensor) -> Tensor:
    return contract(a, b, m, x, p, q, a4, w)[6]


class Deferred(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.arange(4.0).view(2, 2) / 4.0 - 0.3)

    def forward(self, a: Tensor, b: Tensor, m: Tensor, x: Tensor, p: Tensor, q: Tensor, a4: Tensor):
        return contract(a, b, m, x, p, q, a4, self.w)
