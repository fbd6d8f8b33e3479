"""Prints the PyTorch 1.13 values pasted into tests/op_cases.cpp (`torch_case`: the gather, scatter_add and index_add
rows against torch; run with /usr/bin/python3). Inputs are the same closed forms as the C++ side's:
seq(shape, a, b)[i] = sin(a * i + b), float64; gradients are of sum(y * seq(y.shape, 0.4, 0.3))."""
import math
import torch


def seq(shape, a=0.3, b=0.1):
    n = math.prod(shape)
    return torch.tensor([math.sin(a * i + b) for i in range(n)], dtype=torch.float64).reshape(shape)


def show(name, t):
    vals = ", ".join(repr(float(v)) for v in t.detach().flatten().tolist())
    print(f"// {name}: shape {list(t.shape)}\n{{{vals}}}")


def run(name, fn, *xs):
    xs = [x.requires_grad_() if x.is_floating_point() else x for x in xs]
    y = fn(*xs)
    (y * seq(tuple(y.shape), 0.4, 0.3)).sum().backward()
    show(name, y)
    for k, x in enumerate(xs):
        if x.is_floating_point():
            show(f"  grad {k}", x.grad)


idx = torch.tensor([[0, 3], [1, 1], [2, 0]])
run("gather(seq(3, 4), 1, idx)", lambda x, i: torch.gather(x, 1, i), seq((3, 4)), idx)
run("scatter_add(seq(3, 4), 1, idx, seq(3, 2, 0.7, 0.2))", lambda x, i, s: torch.scatter_add(x, 1, i, s), seq((3, 4)), idx,
    seq((3, 2), 0.7, 0.2))
run("index_add(seq(5, 3), 0, [0, 2, 0], seq(3, 3, 0.7, 0.2))", lambda x, i, s: torch.index_add(x, 0, i, s), seq((5, 3)),
    torch.tensor([0, 2, 0]), seq((3, 3), 0.7, 0.2))
