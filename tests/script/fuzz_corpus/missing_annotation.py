# error: 5:7: parameter 'x' needs a type annotation (kiln script types every parameter)
import torch


def f(x, n: int) -> torch.Tensor:
    return x
