"""Expected numbers for tests/test_script_file_names.cpp: tests/data/script_pkg/models/net.py run by PyTorch
(eager: torch.jit.script keeps no lambda on a module). usage: python3 tests/gen_script_file_names_values.py"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
from script_pkg.models.net import Net  # noqa: E402


def show(name, t):
    print(f"{name}: {[round(v, 6) for v in t.detach().flatten().tolist()]}")


idx = torch.tensor([[0, 3, 1], [2, 0, 4]])
for smooth in (True, False):
    net = Net(6, 5, smooth)
    net.eval()
    out = net(idx)
    print(f"smooth={smooth} eval")
    for k in ("sums", "best", "masked"):
        show(k, out[k])
    net.train()
    out = net(idx)
    print(f"smooth={smooth} train")
    show("sums", out["sums"])
    show("running_mean", net.running_mean)
    show("running_var", net.running_var)
    out["sums"].sum().backward()
    show("table.grad", net.table.grad)
