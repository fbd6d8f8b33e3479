# error: 6:14: unknown tensor method 'sofmax'; did you mean softmax?
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    return x.sofmax(1)
