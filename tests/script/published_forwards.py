"""What published forwards use (nanoGPT's among them): split unpacked into names, list and tensor indices,
torch.arange with device= and dtype=, a variable None on one path and a Tensor on the other, math.sqrt of a
size, an assert with an f-string message; torchvision's stochastic_depth (a factory in a tensor's dtype,
known when the graph runs, then bernoulli_ and div_), x.dtype compared with a torch dtype, x.is_cuda; swin's
F.pad and torch.roll by amounts computed when the graph runs, a list copied and changed, x.new_zeros, slices
bounded by a tuple's None, sum() of a list."""
import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


def qkv(x: Tensor) -> Tensor:
    q, k, v = x.split(2, dim=1)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    return att @ v


def split_sizes(x: Tensor) -> Tuple[Tensor, Tensor]:
    a, b = x.split([1, 3], 1)
    return b, a


def last_position(x: Tensor) -> Tensor:
    return x[:, [-1], :]


def first_and_last(x: Tensor) -> Tensor:
    return x[[0, -1]]


def rows(x: Tensor, idx: Tensor) -> Tensor:
    return x[idx] * 2.0


def positions(x: Tensor) -> Tensor:
    b, t = x.size()
    assert t <= 64, f"Cannot forward sequence of length {t}, block size is only {64}"
    pos = torch.arange(0, t, dtype=torch.long, device=x.device)
    return x + pos


def half_steps(n: int) -> Tensor:
    return torch.arange(1, n, 0.5)


def maybe_loss(x: Tensor, targets: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor]]:
    if targets is not None:
        logits = x * 2.0
        loss = (logits - targets).abs().mean()
    else:
        logits = x[:, [-1]]
        loss = None
    return logits, loss


def dtype_follows(x: Tensor, n: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    z = torch.zeros([x.shape[0], 2], dtype=n.dtype, device=x.device) + 3
    f = torch.full((2,), 2.5, dtype=x.dtype)
    e = torch.empty([1] * x.ndim, dtype=n.dtype).fill_(7)
    return z, f, e, n.to(x.dtype) * 0.5 + n.to(x) + x.to(n.dtype) + x.to(x.device)


def dtype_checks(x: Tensor, n: Tensor) -> Tuple[bool, bool, bool, bool]:
    dt = x.dtype
    return x.dtype == torch.float32, n.dtype == torch.float32, dt != n.dtype, x.is_cuda or n.is_cuda


def certain_noise(x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    # draws with p = 1 and p = 0 are certain, so PyTorch and kiln agree
    noise = torch.empty([x.shape[0]] + [1] * (x.ndim - 1), dtype=x.dtype, device=x.device)
    noise = noise.bernoulli_(1.0)
    noise.div_(0.5)
    return x * noise, torch.bernoulli(x, 0.0), x.bernoulli(1.0)


def runtime_pad_roll(x: Tensor, n: int) -> Tuple[Tensor, Tensor, Tensor, int]:
    H, W = x.shape[-2:]
    pad_r = (n - W % n) % n
    y = F.pad(x, (1, pad_r, -1, H % 2), value=0.5)
    shifts = [1, -n]
    shifts = shifts.copy()
    if W > 100:
        shifts[0] = 0
    r = torch.roll(x, shifts=(shifts[0], shifts[1]), dims=(1, 2))
    m = x.new_zeros((H, W))
    for h in ((0, -1), (-1, None)):
        m[h[0]:h[1], 1:] = 2.0
    return y, r, m, sum(shifts)


def runtime_pad_modes(x: Tensor, n: int) -> Tuple[Tensor, Tensor, Tensor]:
    # F.pad's other modes by amounts computed when the graph runs (an index_select each)
    W = x.shape[-1]
    p = (n - W % n) % n
    a = F.pad(x, (p, 1, 1, p - 1), mode='reflect')
    b = F.pad(x, (p, 3, 0, p), mode='replicate')
    if x.dim() == 4:
        c = F.pad(x, (p, 1, 1, p), mode='circular')
    else:
        c = F.pad(x, (p, 1), mode='circular')
    return a, b, c


# CASE: runtime_pad_roll randn(2,5,6) 4
# CASE: runtime_pad_modes randn(1,2,5,6) 4
# CASE: runtime_pad_modes randn(2,5,6) 5
# CASE: runtime_pad_roll randn(1,4,3) 3
# CASE: dtype_follows randn(2,3) randint(0,9,2,3)
# CASE: dtype_checks randn(2,3) randint(0,9,2,3)
# CASE: certain_noise randn(2,3,4)
# CASE: qkv randn(2,6,4)
# CASE: split_sizes randn(2,4)
# CASE: last_position randn(2,5,3)
# CASE: first_and_last randn(4,3)
# CASE: rows randn(5,3) randint(0,5,2,3)
# CASE: positions randint(0,9,2,7)
# CASE: half_steps 4
# CASE: maybe_loss randn(2,3) randn(2,3)
# CASE: maybe_loss randn(2,3) None
