# error: 7:5: cannot write in place to 'x': it is parameter 'x' of 'f', and the caller would see the change, which kiln script does not track; write to a copy (x = x.clone())
import torch
from torch import Tensor


def f(x: Tensor) -> Tensor:
    x[0] = 1.0
    return x
