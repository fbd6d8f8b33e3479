# error: 6:22: dim must be an int or a tuple of ints, each a constant, in kiln script
import torch


def f(x: torch.Tensor, d: int) -> torch.Tensor:
    return x.sum(dim=d)
