import math

import torch
import torch.nn as nn
from torch import Tensor


class TransformerModel(nn.Module):
    """PyTorch's word_language_model TransformerModel as its model.py builds the encoder; learned positions
    stand for its PositionalEncoding and the causal mask is an argument (generate_square_subsequent_mask)."""

    def __init__(self, ntoken: int, ninp: int, nhead: int, nhid: int, nlayers: int, dropout: float = 0.5):
        super().__init__()
        self.model_type = "Transformer"
        self.pos = nn.Parameter(torch.zeros(16, 1, ninp))  # learned positions, up to 16
        self.drop = nn.Dropout(dropout)
        encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src: Tensor, src_mask: Tensor) -> Tensor:
        src = self.encoder(src) * math.sqrt(self.ninp)
        src = self.drop(src + self.pos[: src.size(0)])
        output = self.transformer_encoder(src, src_mask)
        output = self.decoder(output)
        return torch.log_softmax(output, dim=-1)


class Attend(nn.Module):
    """nn.MultiheadAttention called as torchvision's ViT and DETR call it: keyword flags, tuple unpacking,
    [0], and a padding mask."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.0, batch_first=True)
        self.cross = nn.MultiheadAttention(d, heads, kdim=6, vdim=5)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: Tensor, mem_k: Tensor, mem_v: Tensor, pad: Tensor):
        y, _ = self.attn(x, x, x, need_weights=False)
        z = self.norm(x + y)
        c, w = self.cross(z.transpose(0, 1), mem_k, mem_v, key_padding_mask=pad, average_attn_weights=False)
        return c, w
