"""Writes the PyTorch reference data tests/test_attention.cpp compares kiln's scripted attention_kv.py (and eager
nn::MultiheadAttention) with: the state_dict (`state.*`), inputs (`input.*`, the mask as int64), outputs
(`output.*`) and the gradients of q, qb and the parameters (`grad.*`) of sum(output_k * weight_k).
Run with /usr/bin/python3 (PyTorch 1.13) from the repository root:
    python3 tests/script/models/make_attention_kv_fixtures.py tests/script/models/data
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import load, save  # noqa: E402
from make_indexing_fixtures import record  # noqa: E402


def main(out):
    torch.manual_seed(43)
    net = load("attention_kv").KV(8, 2)
    q = torch.randn(3, 8, requires_grad=True)
    k, v = torch.randn(5, 8), torch.randn(5, 8)
    pad = torch.tensor([False, False, True, False, True])
    qb = torch.randn(2, 4, 8, requires_grad=True)
    record(os.path.join(out, "attention_kv.safetensors"), net, {"q": q, "k": k, "v": v, "pad": pad, "qb": qb}, ["q", "qb"])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "data"))
