"""Writes a PyTorch-trained state_dict as safetensors (format written by hand: 8-byte header length,
JSON header, raw little-endian data) plus the model's output on a fixed input, for tests/test_nn.cpp.
Run with /usr/bin/python3 (PyTorch 1.13): python3 tests/data/make_torch_state.py tests/data/torch_state"""
import json
import math
import os
import struct
import sys

import torch

out = sys.argv[1] if len(sys.argv) > 1 else "torch_state"
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
x = torch.tensor([[math.sin(i * 0.37 + 5) for i in range(4 * j, 4 * j + 4)] for j in range(5)])
y = torch.tensor([0, 2, 1, 1, 0])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(10):  # a few steps, so the weights are "trained in PyTorch"
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

header, blobs, offset = {}, [], 0
for name, t in model.state_dict().items():
    b = t.contiguous().numpy().astype("<f4").tobytes()
    header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
    blobs.append(b)
    offset += len(b)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(out, "mlp.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
with torch.no_grad():
    print("expected output:", [f"{v:.7f}" for v in model(x).flatten().tolist()])
