"""torch.tensor and torch.as_tensor in lowered code, as TorchScript takes them: numbers written out (a constant
tensor), numbers known only when the graph runs (filled and joined), nested lists, torch's dtype inference
(ints int64, floats the default float32, bools bool), dtype= and device=, and a scalar."""
import torch
from torch import Tensor
from typing import Tuple


def literals(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    a = torch.tensor([[1.0, 2.5], [-3.0, 4.0]]) * x
    b = torch.tensor([1, 2, 3])
    c = torch.tensor([True, False])
    d = torch.tensor(3.0, device=x.device) + x
    e = torch.tensor([[1, 2], [3, 4]], dtype=torch.float64)
    return a, b, c, d, e


def from_scalars(x: Tensor, n: int, s: float, flag: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    rows = x.size(0)
    a = torch.tensor([[s, 2.0], [0.5, s * 2]]) + x
    b = torch.tensor([n, rows, 7])
    c = torch.tensor([flag, True, not flag])
    d = torch.tensor(s)
    e = torch.tensor([n, 1], dtype=x.dtype, requires_grad=False)
    return a, b, c, d, e


def as_tensors(x: Tensor, n: int) -> Tuple[Tensor, Tensor, Tensor]:
    return torch.as_tensor([n, 2]), torch.as_tensor(x, dtype=torch.float64), torch.as_tensor([[0.5], [1.5]]) * x


# CASE: literals randn(2,2)
# CASE: from_scalars randn(2,2) 5 1.25 True
# CASE: from_scalars randn(2,2) -3 -0.5 False
# CASE: as_tensors randn(2,1) 4
