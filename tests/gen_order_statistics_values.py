"""Prints the PyTorch 1.13 values pasted into tests/test_order_statistics.cpp (run with /usr/bin/python3):
median / kthvalue (values, indices, gradients of sum(values * w)). The inputs are written out here and in the
test."""
import torch


def show(name, t):
    t = t.detach()
    vals = ", ".join(repr(float(v)) if t.is_floating_point() else str(int(v)) for v in t.flatten().tolist())
    print(f"// {name}: shape {list(t.shape)} dtype {t.dtype}\n{{{vals}}}")


# ties in every row and column; rows with 4 elements (median the lower of two), columns with 3
X = [[3.0, 1.0, 2.0, 1.0], [2.0, 2.0, 5.0, 2.0], [0.5, -1.0, 4.0, -1.0]]
W = [1.0, -2.0, 0.5, 3.0]


def grads(fn):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    v, i = fn(x)
    w = torch.tensor(W, dtype=torch.float64)
    w = w[: v.shape[-1]] if v.dim() > 0 else w[0]
    (v * w).sum().backward()
    return v, i, x.grad


for name, fn in [("median(x, 1)", lambda x: torch.median(x, 1)),
                 ("median(x, 0, keepdim=True)", lambda x: torch.median(x, 0, keepdim=True)),
                 ("kthvalue(x, 2, 1)", lambda x: torch.kthvalue(x, 2, 1)),
                 ("kthvalue(x, 3, 0, keepdim=True)", lambda x: torch.kthvalue(x, 3, 0, keepdim=True)),
                 ("kthvalue(x, 4)", lambda x: torch.kthvalue(x, 4))]:
    v, i, g = grads(fn)
    show(name + " values", v)
    show(name + " indices", i)
    show(name + " grad", g)

# median of all elements: the value 2.0 appears four times, and the gradient is shared among them
x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
m = torch.median(x)
(m * 3.0).backward()
show("median(x)", m)
show("median(x) grad of 3 * median", x.grad)
# NaN propagates through median (the first NaN's index), is the largest value for kthvalue
nan = float("nan")
N = torch.tensor([[1.0, nan, 2.0, nan], [4.0, 3.0, 2.0, 1.0]], dtype=torch.float64)
v, i = torch.median(N, 1)
show("median(N, 1) values", v)
show("median(N, 1) indices", i)
v, i = torch.kthvalue(N, 3, 1)
show("kthvalue(N, 3, 1) values", v)
show("kthvalue(N, 3, 1) indices", i)
show("median(N)", torch.median(N))
# integers keep their dtype
v, i = torch.median(torch.tensor([[3, 1, 2, 2], [7, -5, 0, 9]]), 1)
show("median(int, 1) values", v)
show("median(int, 1) indices", i)
show("median(0-d, 0)", torch.stack(list(torch.median(torch.tensor(5.0), 0))))
show("median(empty)", torch.median(torch.zeros(0)))
