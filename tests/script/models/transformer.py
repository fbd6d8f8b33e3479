import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class EncoderLayer(nn.Module):
    """A post-norm transformer encoder layer: multi-head self-attention and a GELU feed-forward."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 64, dropout: float = 0.1):
        super().__init__()
        assert d_model % nhead == 0, "d_model must be divisible by nhead"
        self.nhead = nhead
        self.head_dim = d_model // nhead
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        return x.view(B, T, self.nhead, self.head_dim).transpose(1, 2)

    def attention(self, x: Tensor, mask: Optional[Tensor]) -> Tensor:
        B, T, C = x.shape
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask
        weights = self.dropout(F.softmax(scores, dim=-1))
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)
        return self.out_proj(out)

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        x = self.norm1(x + self.dropout(self.attention(x, mask)))
        x = self.norm2(x + self.dropout(self.linear2(self.dropout(F.gelu(self.linear1(x))))))
        return x
