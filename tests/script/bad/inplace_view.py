# error: 9:5: cannot write in place to 'flat': it shares memory with 'x' through reshape(), which kiln script cannot write back through (it follows x[i] and x[a:b] views); write to a copy (.clone())
import torch
from torch import Tensor


def f(x: Tensor) -> Tensor:
    x = x * 2.0
    flat = x.reshape(-1)
    flat += 1.0
    return x
