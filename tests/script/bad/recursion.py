# error: 10:12: recursive call f -> g -> f is not supported in kiln script (calls are inlined)
from torch import Tensor


def f(x: Tensor) -> Tensor:
    return g(x)


def g(x: Tensor) -> Tensor:
    return f(x)
