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
