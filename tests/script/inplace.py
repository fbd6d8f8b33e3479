"""Writes through views and in-place tensor ops: kiln lowers them to scatters and rebinds every name that
shares the written memory, so the results are torch's."""
import torch
from torch import Tensor
from typing import Tuple


# CASE: store_elements randn(4,5)
def store_elements(x: Tensor) -> Tensor:
    x = x.clone()
    x[0] = 1.0
    x[:, 1:3] = 0.0
    x[-1, -1] = x[0, 0] * 7.0
    x[1:3, ::2] = torch.ones(2, 3) * 2.0
    return x


# CASE: view_write_seen_by_base randn(3,4)
def view_write_seen_by_base(x: Tensor) -> Tuple[Tensor, Tensor]:
    x = x.clone()
    y = x[1]
    y += 1.0
    z = x[:, 2:]
    z.mul_(3.0)
    return x, y


# CASE: base_write_seen_by_view randn(3,4)
def base_write_seen_by_view(x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    x = x * 1.0
    row = x[0]
    col = x[:, 1:3]
    x += 10.0
    x[0, 1] = -1.0
    return row, col, x


# CASE: nested_views randn(2,3,4)
def nested_views(x: Tensor) -> Tensor:
    x = x.clone()
    a = x[1]
    b = a[:, 1:3]
    b[0] = 5.0
    b.relu_()
    c = x[None]
    c[0, 0, 0, 0] = 9.0
    return x


# CASE: runtime_index randn(5,3) 2
# CASE: runtime_index randn(5,3) -1
def runtime_index(x: Tensor, i: int) -> Tensor:
    x = x.clone()
    x[i] += 100.0
    x[:, i - 2:] = 0.5
    return x


# CASE: fill_rows randn(4,3)
def fill_rows(x: Tensor) -> Tensor:
    out = torch.zeros(4, 3)
    for i in range(4):
        out[i] = x[i] * float(i)
        if i % 2 == 1:
            out[i, 0] += 1.0
    return out


# CASE: inplace_methods randn(3,4) randn(3,4)
def inplace_methods(x: Tensor, y: Tensor) -> Tensor:
    x = x.clone()
    x.add_(y)
    x.mul_(2.0)
    x.relu_()
    x.sub_(y * 0.5)
    x.clamp_(min=0.25)
    x[0].zero_()
    x[1].fill_(3.0)
    x[2].copy_(y[0])
    return x


# CASE: int_dtype_kept randint(-5,5,3,4) randn(3,4)
def int_dtype_kept(a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    a = a.clone()
    a += 3
    a *= 2
    b = b.clone()
    b += a
    a[0] = 7.9
    return a, b


# CASE: int_floor_mod randint(-9,9,3,4) randint(1,5,3,4)
def int_floor_mod(a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    return a // b, a % b, a // -b, a % -b


# CASE: float_floor_mod randn(3,4) randn(3,4)
def float_floor_mod(a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    return a // b, a % b


# CASE: alias_by_name randn(2,3)
def alias_by_name(x: Tensor) -> Tuple[Tensor, Tensor]:
    x = x + 0.0
    y = x
    y[0] = 4.0
    y -= 1.0
    return x, y


# CASE: write_in_branch randn(3,3) True
# CASE: write_in_branch randn(3,3) False
def write_in_branch(x: Tensor, c: bool) -> Tensor:
    x = x.clone()
    if c:
        x[0] = 1.0
    else:
        x[1] += 2.0
    x[2] = x[0] + x[1]
    return x


# CASE: print_values randn(2,2) 3
def print_values(x: Tensor, n: int) -> Tensor:
    print("n is", n, 2.5, True, None)
    print(x.sum() > 100.0)
    return x * n


# CASE: alpha_float randn(3,4) randn(3,4)
def alpha_float(x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    z = x.clone()
    z.sub_(y, alpha=2)
    z.add_(y, alpha=0.5)
    return z, torch.add(x, y, alpha=3), x.sub(y, alpha=-1.5)


# CASE: alpha_int randint(-5,5,3,4) randint(-5,5,3,4)
def alpha_int(a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    c = a.clone()
    c.add_(b, alpha=2)
    c.sub_(b, alpha=-3)
    return c, torch.sub(a, b, alpha=4)


# CASE: list_store randn(2,3) 1
# CASE: list_store randn(2,3) -3
def list_store(x: Tensor, i: int) -> Tuple[Tensor, Tensor, Tensor, int, int, int, float]:
    xs = [x, x * 2.0, x * 3.0]
    ys = xs
    xs[i] = x + 100.0
    xs[-1] = xs[0] * 0.5
    ns = [1, 2, 3]
    for k in range(3):
        ns[k] += k * 10
    ns[0] = 7
    fs = [0.5, 1.5]
    fs[1] = fs[0] * 4.0
    return xs[0], xs[1], ys[2], ns[0], ns[1], ns[2], fs[1]


# CASE: writes_through_a_none_index randn(3,4)
def writes_through_a_none_index(x: Tensor) -> Tuple[Tensor, Tensor]:
    x = x.clone()
    y = x[None]
    y += 1.0
    y[0] += 1.0
    y[0, 1] = 2.0
    y.mul_(3.0)
    x[None][0, 2] = -4.0
    return x, y


# CASE: put_after_colon randn(3,4,5) randint(-4,4,3) randn(3,3,5)
def put_after_colon(x: Tensor, i: Tensor, v: Tensor) -> Tensor:
    y = x.clone()
    y[:, i] = v                  # torch's index_put_ on dim 1; a repeated index keeps one write
    return y


# CASE: put_beside_indices randn(3,4,5) randint(0,3,2) 1
def put_beside_indices(x: Tensor, i: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    y = x.clone()
    y[1, i] = 2.0                # the int first, as a view: y[1][i] = 2.0
    y[0:2, i] = y[0:2, i] * 3.0  # beside a slice
    y[i, k] = -1.0               # a run-time int after the index tensor
    z = y[k]                     # a view of y sees the writes after it
    y[k, :, i] = 5.0
    return y, z
