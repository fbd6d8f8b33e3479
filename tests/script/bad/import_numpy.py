# error: 7:12: 'numpy' comes from `import numpy` (line 3), which kiln cannot read
import torch
import numpy


def f(x: torch.Tensor) -> torch.Tensor:
    return numpy.tanh(x)
