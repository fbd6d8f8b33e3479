# error: 5:7: *args and **kwargs are not supported in kiln script
import torch


def f(*xs: torch.Tensor) -> torch.Tensor:
    return xs[0]
