"""Expected numbers for tests/test_script_index_put.cpp: tests/data/script_index_put/mask_tuple.py run by PyTorch 1.13,
a bool mask inside index_put's tuple. usage: python3 tests/gen_script_index_put_values.py"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "script_index_put"))
import mask_tuple  # noqa: E402


def ramp(*shape, k=0):
    # exact in float64: ((3i + k) mod 7 - 3) / 8
    n = 1
    for s in shape:
        n *= s
    return (((torch.arange(float(n), dtype=torch.float64) * 3 + k) % 7 - 3) / 8).view(*shape).requires_grad_()


def show(name, fn, x, *rest):
    v = rest[-1]
    y = fn(x, *rest)
    assert torch.equal(torch.jit.script(fn)(x, *rest), y)
    (y * ramp(*y.shape, k=2).detach()).sum().backward()
    for what, t in [("y", y), ("x.grad", x.grad), ("v.grad", v.grad)]:
        print(f"{name} {what}: {[round(e, 6) for e in t.detach().flatten().tolist()]}")


m = torch.tensor([True, False, True])
show("put_", mask_tuple.put_, ramp(3, 4), m, torch.tensor([1, 3]), ramp(2, k=5))
m2 = torch.tensor([[True, False, True], [False, True, True]])
show("put_accumulate", mask_tuple.put_accumulate, ramp(2, 3, 4), m2, torch.tensor([0, 3, 3, 1]), ramp(4, k=1))
show("write", mask_tuple.write, ramp(3, 4), m, ramp(2, k=4))
