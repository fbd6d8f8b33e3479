# error: 6:5: variable 'y' is int in the if branch and float in the else branch
from torch import Tensor


def f(x: Tensor, n: int) -> Tensor:
    if n > 0:
        y = 1
    else:
        y = 2.5
    return x * y
