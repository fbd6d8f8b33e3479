# error: 7:5: variable 's' is int before the loop and float after an iteration; a loop must keep each variable's type
import torch


def f(x: torch.Tensor, n: int) -> torch.Tensor:
    s = 0
    for i in range(n):
        s = s + 0.5
    return x * s
