"""Prints the PyTorch 1.13 values pasted into tests/test_tensor_ops.cpp and tests/test_script_indexing.cpp (run
with /usr/bin/python3):
median / kthvalue (values, indices, gradients of sum(values * w)) and index_put with a tuple of indices and
accumulate=True. The inputs are written out here and in the test."""
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

# index_put with two index tensors and accumulate=True: repeated (row, col) pairs add up, the indices broadcast
x = torch.arange(12, dtype=torch.float32).reshape(3, 4).requires_grad_()
v = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
i0 = torch.tensor([0, 2, 0, -1, 1])
i1 = torch.tensor([1, 3, 1, 3, -4])
y = x.index_put((i0, i1), v, accumulate=True)
wy = torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.5 - 2.0
(y * wy).sum().backward()
show("index_put 2-D accumulate", y)
show("index_put 2-D accumulate x.grad", x.grad)
show("index_put 2-D accumulate v.grad", v.grad)
# three dims indexed by two broadcast indices (2, 1) and (3,), the value broadcast over the last dim
x3 = torch.arange(24, dtype=torch.float64).reshape(2, 3, 4).requires_grad_()
v3 = torch.tensor([[10.0], [20.0], [30.0]], dtype=torch.float64, requires_grad=True)
j0 = torch.tensor([[1], [1]])
j1 = torch.tensor([0, 2, 0])
y3 = x3.index_put((j0, j1), v3.reshape(3, 1), accumulate=True)
w3 = torch.linspace(-1.0, 1.0, 24, dtype=torch.float64).reshape(2, 3, 4)
(y3 * w3).sum().backward()
show("index_put 3-D accumulate", y3)
show("index_put 3-D accumulate v.grad", v3.grad)
# without accumulate, distinct pairs: a plain write
show("index_put 2-D", torch.zeros(3, 4).index_put((torch.tensor([2, 0]), torch.tensor([1, 3])), torch.tensor([7.0, 8.0])))
for bad in [lambda: torch.zeros(3, 4).index_put((torch.tensor([3]), torch.tensor([0])), torch.tensor([1.0]), accumulate=True),
            lambda: torch.zeros(3, 4).index_put((torch.tensor([0, 1]), torch.tensor([0, 1, 2])), torch.tensor([1.0]), accumulate=True),
            lambda: torch.zeros(3, 4).index_put((torch.tensor([0]), torch.tensor([0]), torch.tensor([0])), torch.tensor([1.0]), accumulate=True)]:
    try:
        bad()
    except Exception as e:
        print("// error:", type(e).__name__, e)
