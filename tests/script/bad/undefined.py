# error: 7:12: undefined name 'totl'; did you mean total?
from torch import Tensor


def f(x: Tensor) -> Tensor:
    total = x + 1
    return totl
