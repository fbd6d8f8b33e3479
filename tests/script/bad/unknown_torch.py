# error: 6:18: unknown function torch.relu_x; did you mean torch.relu?
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    return torch.relu_x(x)
