"""Writes the PyTorch reference data that tests/test_script_indexing.cpp compares kiln's scripted
advanced_indexing.py with: the module's state_dict (`state.*`), inputs (`input.*`, masks as int64), the outputs
(`output.*`) and the gradients of x, rows and the parameters (`grad.*`) of sum(output_k * weight_k) over all outputs
(weights `weight.*`).
Run with /usr/bin/python3 (PyTorch 1.13) from the repository root:
    python3 tests/script/models/make_indexing_fixtures.py tests/script/models/data
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import load, save  # noqa: E402


def main(out):
    torch.manual_seed(41)
    B, T, F = 4, 4, 4
    net = load("advanced_indexing").Indexing(F)
    x = torch.randn(B, T, F, requires_grad=True)
    keep = torch.tensor([True, False, True, True])
    i, j = torch.tensor([[0, 3], [2, -1]]), torch.tensor([1, 2])
    rows = torch.randn(3, T, F, requires_grad=True)
    outs = net(x, keep, i, j, rows)
    weights = [torch.randn(o.shape) for o in outs]
    sum((o * w).sum() for o, w in zip(outs, weights)).backward()
    data = {"state." + k: v for k, v in net.state_dict().items()}
    data.update({"input.0": x.detach(), "input.1": keep.long(), "input.2": i, "input.3": j, "input.4": rows.detach()})
    for k, (o, w) in enumerate(zip(outs, weights)):
        data[f"output.{k}"] = o.detach()
        data[f"weight.{k}"] = w
    data["grad.x"] = x.grad
    data["grad.rows"] = rows.grad
    for k, p in net.named_parameters():
        data["grad." + k] = p.grad
    save(os.path.join(out, "indexing.safetensors"), data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "data"))
