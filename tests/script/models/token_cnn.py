"""A small token CNN: Embedding with a padding index, Conv1d + BatchNorm1d blocks with a class-level attribute,
in-place ops and slice stores, and a dict of named outputs."""
import torch
import torch.nn as nn
from torch import Tensor
from typing import Dict


class ConvBlock(nn.Module):
    expansion = 2

    def __init__(self, channels: int, kernel: int):
        super().__init__()
        wide = channels * self.expansion
        self.conv = nn.Conv1d(channels, wide, kernel, padding=kernel // 2)
        self.bn = nn.BatchNorm1d(wide)
        self.proj = nn.Conv1d(wide, channels, 1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        h = self.bn(self.conv(x))
        h.relu_()
        out = self.proj(h)
        out += x
        return out


class TokenCNN(nn.Module):
    def __init__(self, vocab: int, dim: int, num_classes: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.blocks = nn.ModuleList([ConvBlock(dim, 3), ConvBlock(dim, 5)])
        self.norm = nn.BatchNorm1d(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, tokens: Tensor) -> Dict[str, Tensor]:
        mask = (tokens != 0).float()
        x = self.embed(tokens).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        x = x * mask[:, None]
        pooled = x.sum(dim=2) / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        pooled = self.norm(pooled)
        logits = self.head(pooled)
        out: Dict[str, Tensor] = {"logits": logits}
        out["pooled"] = pooled
        scores = logits.clone()
        scores[:, 0] = 0.0
        scores[0] += 1.0
        if "scores" not in out:
            out["scores"] = scores
        return out
