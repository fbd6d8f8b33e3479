# error: 8:3: unindent does not match any outer indentation level
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    if True:
        x = x + 1
  return x
