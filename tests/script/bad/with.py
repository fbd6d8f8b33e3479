# error: 6:5: with is not supported in kiln script (TorchScript accepts this)
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        x = x + 1
    return x
