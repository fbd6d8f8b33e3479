"""Prints the PyTorch 1.13 values pasted into tests/test_embedding_bag.cpp (run with /usr/bin/python3).
Inputs are the C++ test's closed forms: seq(shape, a, b)[i] = sin(a * i + b), float64."""
import torch
import torch.nn.functional as F

from torch_values import seq, show


idx = torch.tensor([1, 2, 4, 5, 2, 3, 9, 2])
offsets = torch.tensor([0, 2, 2, 5])
for mode in ["sum", "mean", "max"]:
    w = seq((10, 3)).requires_grad_()
    y = F.embedding_bag(idx, w, offsets, mode=mode)
    show(f"embedding_bag(idx, w, offsets, mode='{mode}')", y)
    (y * seq(tuple(y.shape), 0.7, 0.2)).sum().backward()
    show(f"grad w of mode='{mode}'", w.grad)
w = seq((10, 3))
show("embedding_bag(idx, w, [0, 3, 3, 8], mode='sum', include_last_offset=True)",
     F.embedding_bag(idx, w, torch.tensor([0, 3, 3, 8]), mode="sum", include_last_offset=True))
show("embedding_bag(idx, w, [0, 2, 5], mode='sum', per_sample_weights=seq(8, 0.9, 0.4))",
     F.embedding_bag(idx, w, torch.tensor([0, 2, 5]), mode="sum", per_sample_weights=seq((8,), 0.9, 0.4)))
for mode in ["mean", "max"]:
    show(f"embedding_bag(idx, w, offsets, mode='{mode}', padding_idx=2)", F.embedding_bag(idx, w, offsets, mode=mode, padding_idx=2))
show("embedding_bag(idx.view(2, 4), w, mode='mean', padding_idx=2)", F.embedding_bag(idx.view(2, 4), w, mode="mean", padding_idx=2))
show("embedding_bag(idx.view(2, 4), w, mode='max')", F.embedding_bag(idx.view(2, 4), w, mode="max"))
# nn.Embedding(max_norm): the looked-up rows renormalised in the weight, in place
emb = torch.nn.Embedding(6, 3, max_norm=1.0).double()
with torch.no_grad():
    emb.weight.copy_(seq((6, 3)) * 2)
idx2 = torch.tensor([[0, 2], [2, 5]])
y = emb(idx2)
show("Embedding(6, 3, max_norm=1.0)(idx2) with weight seq((6, 3)) * 2", y)
(y * seq(tuple(y.shape), 0.7, 0.2)).sum().backward()
show("its weight after", emb.weight)
show("its weight grad", emb.weight.grad)
emb = torch.nn.Embedding(6, 3, max_norm=0.5, norm_type=1.0).double()
with torch.no_grad():
    emb.weight.copy_(seq((6, 3)))
show("Embedding(6, 3, max_norm=0.5, norm_type=1.0)(idx2) with weight seq((6, 3))", emb(idx2))
