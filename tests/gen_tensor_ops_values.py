"""Prints the PyTorch 1.13 values pasted into tests/test_tensor_ops.cpp (run with /usr/bin/python3).
Inputs are the same closed forms as the C++ test's: seq(shape, a, b)[i] = sin(a * i + b), float64."""
import math
import torch


def seq(shape, a=0.3, b=0.1):
    n = math.prod(shape)
    return torch.tensor([math.sin(a * i + b) for i in range(n)], dtype=torch.float64).reshape(shape)


def show(name, t):
    t = t.detach()
    vals = ", ".join(repr(float(v)) if t.is_floating_point() else str(int(v)) for v in t.flatten().tolist())
    print(f"// {name}: shape {list(t.shape)} dtype {t.dtype}\n{{{vals}}}")


x = seq((2, 3, 4))
show("tril(x, -1)", torch.tril(x, -1))
show("triu(x, 1)", torch.triu(x, 1))
show("tril(seq(3, 5), 2)", torch.tril(seq((3, 5)), 2))
s = seq((3, 5), 0.7, 0.2)
v, i = torch.topk(s, 3)
show("topk(s, 3) values", v)
show("topk(s, 3) indices", i)
v, i = torch.topk(s, 2, dim=0, largest=False)
show("topk(s, 2, dim=0, largest=False) values", v)
show("topk(s, 2, dim=0, largest=False) indices", i)
t = torch.tensor([[3.0, 1.0, 3.0, float("nan"), 1.0, 2.0]], dtype=torch.float64)
show("sort(t) indices", torch.sort(t, stable=True)[1])
show("sort(t, descending) indices", torch.sort(t, descending=True, stable=True)[1])
m = torch.tensor([True, False, True, False])
show("masked_fill(seq(2, 4), m, -inf)", seq((2, 4)).masked_fill(m, float("-inf")))
show("masked_fill(arange(8) int64, m, 2.7)", torch.arange(8).reshape(2, 4).masked_fill(m, 2.7))
show("seq(2, 3).repeat(2, 1, 2)", seq((2, 3)).repeat(2, 1, 2))
r = seq((2, 3)).requires_grad_()
(r.repeat(2, 1, 2) * seq((2, 2, 6), 0.2, 0.5)).sum().backward()
show("grad of (repeat(2, 1, 2) * seq(2, 2, 6, 0.2, 0.5)).sum()", r.grad)

print("// ---- group 2 ----")
x = seq((2, 3, 4))
show("flip(x, [0, 2])", torch.flip(x, [0, 2]))
show("roll(x, [1, -5], [1, 2])", torch.roll(x, [1, -5], [1, 2]))
show("roll(x, 7) (flattened)", torch.roll(x, 7))
show("repeat_interleave(seq(2, 2), 2, dim=-1)", torch.repeat_interleave(seq((2, 2)), 2, dim=-1))
show("repeat_interleave(seq(2, 2), 3)", torch.repeat_interleave(seq((2, 2)), 3))
show("one_hot([[2, 0], [1, 3]], 5)", torch.nn.functional.one_hot(torch.tensor([[2, 0], [1, 3]]), 5))
p = seq((1, 2, 3))
show("pad(p, (1, 2)) constant", torch.nn.functional.pad(p, (1, 2)))
show("pad(p, (1, 2, 1, 0), value=-1)", torch.nn.functional.pad(p, (1, 2, 1, 0), value=-1.0))
show("pad(p, (2, 1), reflect)", torch.nn.functional.pad(p, (2, 1), mode="reflect"))
show("pad(p, (2, 1), replicate)", torch.nn.functional.pad(p, (2, 1), mode="replicate"))
show("pad(p, (-1, 1))", torch.nn.functional.pad(p, (-1, 1)))
c = seq((2, 4), 0.9, 0.4)
show("cumsum(c, 1)", torch.cumsum(c, 1))
show("cumprod(c, 0)", torch.cumprod(c, 0))
show("cumsum(bool) dtype", torch.cumsum(torch.tensor([True, False, True]), 0))
show("norm(c)", torch.norm(c))
show("vector_norm(c, 3, dim=1)", torch.linalg.vector_norm(c, 3, dim=1))
show("vector_norm(c, inf, dim=0)", torch.linalg.vector_norm(c, float("inf"), dim=0))
show("normalize(c, dim=1)", torch.nn.functional.normalize(c, dim=1))
show("addmm(seq(2,2), seq(2,3), seq(3,2), beta=0.5, alpha=2)", torch.addmm(seq((2, 2)), seq((2, 3)), seq((3, 2)), beta=0.5, alpha=2.0))
show("where(c > 0, 1.0, 0.0) dtype", torch.where(c > 0, 1.0, 0.0))

print("// ---- cumprod over zeros ----")
z = torch.tensor([[2.0, 0.0, 3.0, 0.0, 5.0], [0.5, 1.5, -2.0, 4.0, 0.0], [0.0, 1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
gz = seq((3, 5), 0.4, 0.3)
for d in (1, 0):
    zr = z.clone().requires_grad_()
    torch.cumprod(zr, d).backward(gz)
    show(f"grad of cumprod(z, {d}) against seq(3, 5, 0.4, 0.3)", zr.grad)

print("// ---- repeat_interleave with a tensor of counts ----")
r = seq((2, 3)).requires_grad_()
y = torch.repeat_interleave(r, torch.tensor([1, 0, 3]), dim=1)
show("repeat_interleave(seq(2, 3), [1, 0, 3], dim=1)", y)
(y * seq(tuple(y.shape), 0.2, 0.5)).sum().backward()
show("  grad against seq(y.shape, 0.2, 0.5)", r.grad)
show("repeat_interleave(seq(2, 3), [2, 1], dim=-2)", torch.repeat_interleave(seq((2, 3)), torch.tensor([2, 1]), dim=-2))
show("repeat_interleave(seq(2, 3), tensor(2))", torch.repeat_interleave(seq((2, 3)), torch.tensor(2)))
show("repeat_interleave([2, 0, 1])", torch.repeat_interleave(torch.tensor([2, 0, 1])))
