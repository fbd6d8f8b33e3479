"""Expected numbers for tests/test_script_unpack_imports.cpp: tests/data/script_pkg/models/unpacked.py (module-level
unpacking, `from . import blocks`, `from .. import common`) run by PyTorch 1.13 (eagerly: torch.jit.script takes no tuple global).
usage: python3 tests/gen_script_unpack_imports_values.py"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
from script_pkg.models.unpacked import Unpacked  # noqa: E402

net = Unpacked(5)
x = (torch.arange(10.0).view(2, 5) - 4.0) / 3.0
y = net(x)
print("out:", [round(v, 6) for v in y.flatten().tolist()])
y.sum().backward()
print("w.grad:", [round(v, 6) for v in net.w.grad.flatten().tolist()])

# starred module-level targets (class Starred)
from script_pkg.models.unpacked import Starred  # noqa: E402

torch.manual_seed(0)
s = Starred()
w = (torch.arange(12.0).view(4, 3) - 5.0) / 7.0
b = torch.tensor([0.1, -0.2, 0.3, -0.4])
with torch.no_grad():
    s.lin.weight.copy_(w)
    s.lin.bias.copy_(b)
x = (torch.arange(6.0).view(2, 3) - 2.0) / 2.0
y = s(x)
print("starred out:", [round(v, 6) for v in y.flatten().tolist()])
y.sum().backward()
print("starred lin.weight.grad:", [round(v, 6) for v in s.lin.weight.grad.flatten().tolist()])
