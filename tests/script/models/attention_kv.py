"""nn.MultiheadAttention with add_bias_kv and add_zero_attn on unbatched inputs ((L, E) query, (S) key_padding_mask),
as torch runs it. Compared with PyTorch by tests/test_attention.cpp (fixtures from make_attention_kv_fixtures.py)."""
import torch
import torch.nn as nn
from torch import Tensor


class KV(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, add_bias_kv=True, add_zero_attn=True)
        self.first = nn.MultiheadAttention(embed_dim, num_heads, add_bias_kv=True, batch_first=True)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, pad: Tensor, qb: Tensor):
        out, w = self.attn(q, k, v, key_padding_mask=pad)
        per_head, heads = self.attn(q, k, v, need_weights=True, average_attn_weights=False)
        batched, bw = self.first(qb, qb, qb)
        return out, w, per_head, heads, batched, bw
