# error: 6:18: Tensor.sum() got an unexpected keyword argument 'dims'; did you mean dim?
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dims=1)
