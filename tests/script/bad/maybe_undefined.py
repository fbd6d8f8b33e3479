# error: 8:12: 'y' is not defined on every path to here (it is assigned in only some branches, or only inside a loop)
import torch


def f(x: torch.Tensor, n: int) -> torch.Tensor:
    if n > 0:
        y = x
    return y
