"""A character GPT written the way minGPT-style repositories write theirs: a config node that fills itself
from keyword arguments through __dict__, submodules gathered in nn.ModuleDict(dict(...)), the MLP run by a
lambda that closes over a local, a tanh-GELU module, weights set by apply() and a named_parameters() pass,
and helpers nothing here calls (a default-config staticmethod, an optimizer builder, sampling)."""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F

from charlm.utils import set_seed  # a training-script helper kiln never needs


class Node:
    """Attribute bag for hyperparameters."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def merge(self, d):
        self.__dict__.update(d)


class TanhGELU(nn.Module):
    def forward(self, x):
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


class SelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.width % cfg.heads == 0, f"width {cfg.width} is not a multiple of {cfg.heads} heads"
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.out = nn.Linear(cfg.width, cfg.width)
        self.drop_attn = nn.Dropout(cfg.drop)
        self.drop_out = nn.Dropout(cfg.drop)
        causal = torch.tril(torch.ones(cfg.context, cfg.context))
        self.register_buffer("causal", causal.view(1, 1, cfg.context, cfg.context))
        self.heads, self.width = cfg.heads, cfg.width

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(self.width, dim=2)
        hs = C // self.heads
        q = q.view(B, T, self.heads, hs).transpose(1, 2)
        k = k.view(B, T, self.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.heads, hs).transpose(1, 2)
        w = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        w = w.masked_fill(self.causal[:, :, :T, :T] == 0, float("-inf"))
        w = self.drop_attn(F.softmax(w, dim=-1))
        y = (w @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.drop_out(self.out(y))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm_a = nn.LayerNorm(cfg.width)
        self.attn = SelfAttention(cfg)
        self.norm_b = nn.LayerNorm(cfg.width)
        self.ff = nn.ModuleDict(dict(
            up=nn.Linear(cfg.width, 4 * cfg.width),
            down=nn.Linear(4 * cfg.width, cfg.width),
            act=TanhGELU(),
            drop=nn.Dropout(cfg.drop),
        ))
        f = self.ff
        self.ff_run = lambda x: f.drop(f.down(f.act(f.up(x))))

    def forward(self, x):
        x = x + self.attn(self.norm_a(x))
        return x + self.ff_run(self.norm_b(x))


class CharGPT(nn.Module):
    @staticmethod
    def defaults():
        return Node(width=32, heads=4, layers=2, drop=0.1)

    def __init__(self, cfg):
        super().__init__()
        assert cfg.vocab is not None
        self.context = cfg.context
        self.body = nn.ModuleDict(dict(
            tok=nn.Embedding(cfg.vocab, cfg.width),
            pos=nn.Embedding(cfg.context, cfg.width),
            drop=nn.Dropout(cfg.drop),
            layers=nn.ModuleList([Layer(cfg) for _ in range(cfg.layers)]),
            norm=nn.LayerNorm(cfg.width),
        ))
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("out.weight") or name.endswith("down.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.layers))
        count = sum(p.numel() for p in self.body.parameters())
        print(f"{count / 1e6:.3f}M parameters in the body")

    def _init(self, m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def optimizer(self, lr):
        return torch.optim.AdamW(self.parameters(), lr=lr, betas=(0.9, 0.95))

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.context, f"sequence of {t} is longer than the context {self.context}"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.body.drop(self.body.tok(idx) + self.body.pos(pos))
        for layer in self.body.layers:
            x = layer(x)
        logits = self.head(self.body.norm(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    @torch.no_grad()
    def sample(self, idx, steps, temperature=1.0):
        for _ in range(steps):
            cond = idx if idx.size(1) <= self.context else idx[:, -self.context:]
            logits, _ = self(cond)
            probs = F.softmax(logits[:, -1, :] / temperature, dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx
