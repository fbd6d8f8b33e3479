"""return in branches and inside loops: the rest of the function runs only when nothing returned."""
import torch
from torch import Tensor


def sign_class(x: Tensor) -> int:
    s = float(x.sum())
    if s > 1.0:
        return 1
    elif s < -1.0:
        return -1
    return 0


def find_row(x: Tensor, target: float) -> Tensor:
    for i in range(x.shape[0]):
        if bool(x[i].max() > target):
            return x[i]
    return torch.zeros_like(x[0])


def clipped_cumsum(x: Tensor, limit: float) -> Tensor:
    acc = torch.zeros_like(x[0])
    i = 0
    while i < x.shape[0]:
        acc = acc + x[i]
        if acc.sum() > limit:
            return acc * 0.5
        i += 1
    return acc


def nested_exit(x: Tensor, n: int) -> Tensor:
    for i in range(n):
        for j in range(n):
            if i * j > 6:
                return x * float(i * 10 + j)
    return -x


# CASE: sign_class randn(5)
# CASE: sign_class randn(40)
# CASE: find_row randn(5,3) 1.2
# CASE: find_row randn(2,3) 9.0
# CASE: clipped_cumsum rand(6,2) 1.5
# CASE: clipped_cumsum rand(3,2) 100.0
# CASE: nested_exit randn(2) 5
# CASE: nested_exit randn(2) 2
