# error: 8:26: the message of a raise or an assert in kiln script is a string, an f-string or "...".format(...)
import torch
from torch import Tensor


def f(x: Tensor, n: int) -> Tensor:
    if n < 0:
        raise ValueError(n)
    return x
