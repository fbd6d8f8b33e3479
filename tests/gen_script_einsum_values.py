"""Expected numbers for tests/test_script_einsum.cpp: tests/data/script_einsum/ellipsis.py and deferred.py run by
PyTorch 1.13 (torch.jit.script agrees). usage: python3 tests/gen_script_einsum_values.py"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "script_einsum"))
from deferred import Deferred  # noqa: E402
from ellipsis import Contract  # noqa: E402


def ramp(*shape, k=0):
    # exact in float32: ((3i + k) mod 7 - 3) / 8
    n = 1
    for s in shape:
        n *= s
    return (((torch.arange(float(n)) * 3 + k) % 7 - 3) / 8).view(*shape).requires_grad_()


ins = [ramp(2, 2, 3), ramp(2, 3, 2, k=1), ramp(3, 2, k=2), ramp(2, 2, 3, k=3), ramp(2, 1, 2, 3, k=4)]
net = Contract()
out = net(*ins)
assert torch.allclose(torch.jit.script(Contract())(*ins)[-1], out[-1])
for name, t in zip(["y1", "y3", "y4", "y5", "y6", "y7", "y8", "loss"], out):
    print(f"{name}: {[round(v, 6) for v in t.detach().flatten().tolist()]}")
out[-1].backward()
for name, t in zip(["a", "b", "m", "x", "a4"], ins):
    print(f"grad {name}: {[round(v, 6) for v in t.grad.flatten().tolist()]}")
print(f"grad v: {[round(v, 6) for v in net.v.grad.flatten().tolist()]}")

# deferred.py: the forms a script runs as one prim::einsum
ins = [ramp(2, 2, 3), ramp(2, 3, 2, k=1), ramp(3, 2, k=2), ramp(2, 2, 3, k=3), ramp(2, 1, 3, k=5), ramp(2, 2, 3, k=6),
       ramp(2, 1, 2, 3, k=4)]
net = Deferred()
out = net(*ins)
assert torch.allclose(torch.jit.script(Deferred())(*ins)[-1], out[-1])
for name, t in zip(["y1", "y2", "y3", "y4", "y5", "y6", "loss"], out):
    print(f"deferred {name}: {[round(v, 6) for v in t.detach().flatten().tolist()]}")
out[-1].backward()
for name, t in zip(["a", "b", "m", "x", "p", "q", "a4"], ins):
    print(f"deferred grad {name}: {[round(v, 6) for v in t.grad.flatten().tolist()]}")
print(f"deferred grad w: {[round(v, 6) for v in net.w.grad.flatten().tolist()]}")
