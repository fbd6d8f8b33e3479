"""Tensor ops of model files: masked_fill (a causal mask filled with -inf), tril/triu on any rank >= 2, topk,
sort/argsort, multinomial on one-hot rows (deterministic), expand/expand_as and repeat."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def causal_scores(q: Tensor, k: Tensor) -> Tensor:
    T = q.size(1)
    att = q @ k.transpose(-2, -1)
    mask = torch.tril(torch.ones(T, T)) == 0
    att = att.masked_fill(mask, float('-inf'))
    return F.softmax(att, dim=-1)


def masked_fill_forms(x: Tensor, m: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    keep = m > 0.5
    y = x.clone()
    y.masked_fill_(keep, 2.5)
    return torch.masked_fill(x, keep, -1.0), y, x.masked_fill(keep[0], x[0, 0] * 0.0 + 7.0)


def triangles(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    return torch.tril(x), x.tril(-1), torch.triu(x, 1), x.triu(diagonal=-2) * 2.0


def top(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    v, i = torch.topk(x, 3)
    v2, i2 = x.topk(2, dim=0, largest=False)
    return v, i, v2 * 1.0, i2


def top_runtime_k(x: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    v, i = torch.topk(x, min(k, x.size(-1)))
    return v, i


def sorting(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    v, i = torch.sort(x, dim=1, descending=True)
    return v, i, torch.argsort(x, dim=0), x.sort()[0]


def one_hot_draws(x: Tensor) -> Tuple[Tensor, Tensor]:
    p = (x == x.amax(dim=1, keepdim=True)).float()
    return torch.multinomial(p, 4, replacement=True), p.multinomial(1)


def expanding(x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    B = y.size(0)
    a = x.expand(3, -1, -1)
    b = x[0:1].expand(B, x.size(1))
    c = x[:, 0:1].expand_as(x)
    return a * 1.0, b + 0.0, c, x.repeat(2, 1, 3)


# CASE: causal_scores randn(2,5,4) randn(2,5,4)
# CASE: masked_fill_forms randn(3,4) rand(3,4)
# CASE: triangles randn(2,3,4)
# CASE: triangles randn(5,3)
# CASE: top randn(4,6)
# CASE: top_runtime_k randn(3,5) 3
# CASE: top_runtime_k randn(3,5) 9
# CASE: sorting randn(4,5)
# CASE: one_hot_draws randn(3,6)
# CASE: expanding randn(2,4) randn(5,1)


def layout_ops(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    return torch.flip(x, [0, -1]), x.roll(2, 1), torch.roll(x, 3), x.repeat_interleave(2, dim=1), torch.cumsum(x, 1), x.cumprod(dim=0)


def paddings(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    return F.pad(x, (1, 2)), F.pad(x, (2, 1, 1, 0), value=-1.5), F.pad(x, (2, 1), mode="reflect"), F.pad(x, [1, 1, 2, 0], mode="replicate")


def classes(i: Tensor) -> Tensor:
    return F.one_hot(i, 6)


def norms(x: Tensor, y: Tensor, z: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    return (torch.norm(x), x.norm(p=2, dim=1), torch.linalg.vector_norm(x, 3, dim=0), F.normalize(x, dim=1),
            torch.addmm(z, x, y, beta=0.5, alpha=2.0), torch.where(x > 0, 1.0, 0.0), torch.clamp(x, min=y[:, 0], max=x[0] + 0.5))



# CASE: layout_ops randn(3,4)
# CASE: paddings randn(2,3,4)
# CASE: classes randint(0,6,3,2)
# CASE: norms randn(3,4) randn(4,3) randn(3,3)


def contractions(q: Tensor, k: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    att = torch.einsum('bhid,bhjd->bhij', q, k)
    return (att, torch.einsum('ij,jk->ik', a, b), torch.einsum('bij,bjk->bik', q[0], k[0].transpose(1, 2)),
            torch.einsum('i,j->ij', a[0], b[0]), torch.einsum('bhij,bhjd->bihd', att, k))


# CASE: contractions randn(2,3,4,5) randn(2,3,4,5) randn(3,4) randn(4,2)
