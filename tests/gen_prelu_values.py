"""Prints the PyTorch 1.13 values pasted into tests/test_prelu.cpp (run with /usr/bin/python3).
Inputs are the same closed forms as the C++ test's: seq(shape, a, b)[i] = sin(a * i + b), float64."""
import math
import torch
import torch.nn.functional as F


def seq(shape, a=0.3, b=0.1):
    n = math.prod(shape)
    return torch.tensor([math.sin(a * i + b) for i in range(n)], dtype=torch.float64).reshape(shape)


def show(name, t):
    vals = ", ".join(repr(float(v)) for v in t.detach().flatten().tolist())
    print(f"// {name}: shape {list(t.shape)}\n{{{vals}}}")


# x has exact zeros (sin(0) at i = 0 with b = 0), where torch takes the scaled branch
for xs, ws in (((2, 3, 4), (3,)), ((2, 3, 4), (1,)), ((4, 3), (3,)), ((5,), (1,))):
    x = seq(xs, 0.7, 0.0).requires_grad_()
    w = seq(ws, 0.9, 0.4).requires_grad_()
    y = F.prelu(x, w)
    (y * seq(xs, 0.4, 0.3)).sum().backward()
    show(f"prelu(seq{xs}, 0.7, 0), seq{ws}, 0.9, 0.4)", y)
    show("  grad x", x.grad)
    show("  grad w", w.grad)
m = torch.nn.PReLU(3, 0.1)
print(list(m.state_dict().keys()), m.weight.tolist(), m.weight.dtype)
