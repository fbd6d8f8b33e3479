import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from . import blocks
from .. import common

MEAN, STD = (0.5,), (0.25,)
A, B = 3, 4
(ROWS, COLS), NAME = (2, 3), "unpacked"


class Unpacked(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        width = blocks.make_width(A)
        self.w = nn.Parameter(torch.arange(float(width * n)).view(width, n) / (width * n) - 0.5)
        self.gain = blocks.GAIN * STD[0]
        self.register_buffer("shift", torch.arange(float(B)) * common.EPS * 100.0)
        self.name = NAME

    def forward(self, x: Tensor) -> Tensor:
        h = (x - MEAN[0]) / STD[0]
        h = blocks.scaled_tanh(F.linear(h, self.w), self.gain) - blocks.BIAS
        h = h.view(-1, A, 2).sum(-1).repeat(1, 2)[:, :B] + self.shift
        h = common.clip(h * float(B) * 0.25, common.LO, common.HI)
        return h * float(ROWS * COLS) + common.EPS

# starred targets: the starred name is always a list; blocks.WIDTH_MULT read through an imported module
FIRST, *MIDDLE, LAST = 1, 2, 3, 4
*SCALES, TOP = (0.5, 1.5)
ONLY, *NONE_LEFT = [7]


class Starred(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(FIRST + len(MIDDLE), LAST)
        self.k = sum(MIDDLE) + len(NONE_LEFT) * 100

    def forward(self, x: Tensor) -> Tensor:
        h = self.lin(x) * SCALES[0] + TOP
        return h * float(self.k) + float(MIDDLE[1] - ONLY) + blocks.WIDTH_MULT
