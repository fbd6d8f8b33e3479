"""What the tests/gen_*_values.py scripts share: the C++ tests' closed-form inputs and the printing of values
to paste into them."""
import math

import torch


def seq(shape, a=0.3, b=0.1):
    """seq(shape, a, b)[i] = sin(a * i + b), float64: tests/support.h's seq."""
    n = math.prod(shape)
    return torch.tensor([math.sin(a * i + b) for i in range(n)], dtype=torch.float64).reshape(shape)


def show(name, t):
    t = t.detach()
    vals = ", ".join(f"{float(v):.12g}" for v in t.flatten().tolist())
    print(f"// {name}: shape {list(t.shape)}\n{{{vals}}}")
