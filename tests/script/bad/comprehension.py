# error: 7:12: list comprehensions are not supported in kiln script (TorchScript accepts this)
import torch
from typing import List


def f(x: torch.Tensor) -> List[torch.Tensor]:
    return [x * i for i in range(3)]
