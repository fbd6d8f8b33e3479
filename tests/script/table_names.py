"""torch names that come from the op table (core/ops.def) without a frontend entry: floor, floor_divide,
negative; // and % (the floor_divide row and the remainder composite) on float and integer tensors."""
import torch
from torch import Tensor


def floors(x: Tensor) -> Tensor:
    return torch.floor(x * 3.0) + x.floor() - torch.negative(x)


def floor_divide(a: Tensor, b: Tensor) -> Tensor:
    return torch.floor_divide(a, b + 2.0) + a.floor_divide(-1.5)


def int_division(a: Tensor, b: Tensor) -> Tensor:
    return torch.stack([a // b, a % b, torch.remainder(a, b), torch.floor_divide(-a, b)])


def float_remainder(a: Tensor, b: Tensor) -> Tensor:
    return a % (b - 0.5) + torch.remainder(a, 1.25) + a // (b + 1.0)


# CASE: floors randn(3,4)
# CASE: floor_divide randn(3,4) rand(4)
# CASE: int_division randint(-20,20,4,5) randint(1,7,5)
# CASE: float_remainder randn(3,4) rand(3,4)
