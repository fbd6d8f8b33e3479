import torch
from torch import Tensor


def put_(x: Tensor, m: Tensor, i: Tensor, v: Tensor) -> Tensor:
    y = x * 1.0
    y.index_put_((m, i), v)
    return y


def put_accumulate(x: Tensor, m: Tensor, i: Tensor, v: Tensor) -> Tensor:
    return torch.index_put(x, (m, i), v, accumulate=True)


def write(x: Tensor, m: Tensor, v: Tensor) -> Tensor:
    y = x * 1.0
    y[m, 0] = v
    return y
