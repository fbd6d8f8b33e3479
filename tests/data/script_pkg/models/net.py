from typing import Dict, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from ..ops import shift
from ._utils import SCALE, _make_divisible
from .helpers import gelu

EPS = 1e-3
NEG_INF = float("-inf")
DIMS = (0, 2)
WIDTH = _make_divisible(6 * 1.5, 4)
swish = lambda t: t * torch.sigmoid(t)


def ramp(*shape):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(float(n)).view(*shape) - (n - 1) / 2) / n


class Net(nn.Module):
    def __init__(self, n: int, vocab: int, smooth: bool):
        super().__init__()
        self.table = nn.Parameter(ramp(vocab, n) * 4.0)
        self.w = nn.Parameter(ramp(WIDTH, n) * 3.0)
        self.register_buffer("running_mean", ramp(WIDTH))
        self.register_buffer("running_var", torch.ones(WIDTH) * 2.0)
        self.gamma = nn.Parameter(torch.ones(WIDTH) * 1.5)
        self.scales = nn.ParameterDict({"a": nn.Parameter(ramp(WIDTH)), "b": nn.Parameter(torch.ones(WIDTH) * 0.1)})
        k = 0.5
        self.act = lambda t: t * torch.sigmoid(t) * k
        self.post = (lambda t: F.gelu(t)) if smooth else nn.ReLU()
        self.sizes = torch.jit.annotate(List[int], [n, vocab])

    def forward(self, idx: Tensor) -> Dict[str, Tensor]:
        x = F.embedding(idx, self.table, padding_idx=0)
        h = F.linear(x, self.w).transpose(1, 2)
        h = F.batch_norm(h, self.running_mean, self.running_var, self.gamma, None, self.training, 0.25, EPS)
        h = self.act(h) + self.post(h) + swish(h)
        for name, p in self.scales.items():
            h = h + p.view(1, -1, 1)
        h = shift(gelu(h), SCALE) * self.scales["b"].view(1, -1, 1)
        outs = torch.jit.annotate(List[Tensor], [])
        outs.append(h.sum(DIMS))
        named = torch.jit.annotate(Dict[str, Tensor], {})
        best = torch.jit.annotate(Optional[Tensor], None)
        if best is None:
            best = h.sum(1)
        named["sums"] = outs[0] * float(_make_divisible(h.size(1), 8) + self.sizes[1])
        named["best"] = best
        named["masked"] = torch.exp(h.masked_fill(h < 0.3, NEG_INF)).sum(DIMS)
        return named
