"""Writes the PyTorch reference data that tests/test_script_indexing.cpp compares kiln's scripted
advanced_indexing.py and mixed_indexing.py with, one file each: the module's state_dict (`state.*`), inputs (`input.*`, masks as int64), the outputs
(`output.*`) and the gradients of x, rows and the parameters (`grad.*`) of sum(output_k * weight_k) over all outputs
(weights `weight.*`).
Run from the repository root with /usr/bin/python3 (PyTorch 1.13), which writes indexing.safetensors, and with
PyTorch 2.x (~/.cache/kiln-sota-venv/bin/python, 2.15), which writes mixed_indexing.safetensors: PyTorch 1.13 applies an
int after a 2-D mask (`h[grid, 1]`) to the mask's second dim, a bug PyTorch 2 fixed and kiln does not copy.
    python3 tests/script/models/make_indexing_fixtures.py tests/script/models/data
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import load, save  # noqa: E402


def record(path, net, inputs, grads):
    """inputs: name -> tensor in forward's order; grads: the names of the inputs whose gradients are kept."""
    outs = net(*inputs.values())
    weights = [torch.randn(o.shape) for o in outs]
    sum((o * w).sum() for o, w in zip(outs, weights)).backward()
    data = {"state." + k: v for k, v in net.state_dict().items()}
    for k, t in enumerate(inputs.values()):
        data[f"input.{k}"] = t.detach().long() if t.dtype == torch.bool else t.detach()
    for k, (o, w) in enumerate(zip(outs, weights)):
        data[f"output.{k}"] = o.detach()
        data[f"weight.{k}"] = w
    for name in grads:
        data["grad." + name] = inputs[name].grad
    for k, p in net.named_parameters():
        data["grad." + k] = p.grad
    save(path, data)


def main(out):
    B, T, F = 4, 4, 4
    if int(torch.__version__.split(".")[0]) >= 2:
        return mixed(out, B, T, F)
    torch.manual_seed(41)
    net = load("advanced_indexing").Indexing(F)
    x = torch.randn(B, T, F, requires_grad=True)
    keep = torch.tensor([True, False, True, True])
    i, j = torch.tensor([[0, 3], [2, -1]]), torch.tensor([1, 2])
    rows = torch.randn(3, T, F, requires_grad=True)
    record(os.path.join(out, "indexing.safetensors"), net,
           {"x": x, "keep": keep, "i": i, "j": j, "rows": rows}, ["x", "rows"])


def mixed(out, B, T, F):
    torch.manual_seed(42)
    net = load("mixed_indexing").Mixed(F)
    x = torch.randn(B, T, F, requires_grad=True)
    keep = torch.tensor([True, False, True, True])
    grid = torch.tensor([[True, False, True, False], [False, False, True, True],
                         [True, True, False, False], [False, True, False, True]])
    i = torch.tensor([3, -4])
    rows = torch.randn(2, T, F, requires_grad=True)
    record(os.path.join(out, "mixed_indexing.safetensors"), net,
           {"x": x, "keep": keep, "grid": grid, "i": i, "rows": rows}, ["x", "rows"])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "data"))
