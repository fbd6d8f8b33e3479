"""Expected numbers for tests/test_embedding_options.cpp: F.embedding / nn.Embedding's max_norm, norm_type and
scale_grad_by_freq in PyTorch 1.13. usage: /usr/bin/python3 tests/gen_embedding_options_values.py"""
import torch
import torch.nn.functional as F


def weight():
    return ((torch.arange(15.0).view(5, 3) - 7.0) / 4.0).requires_grad_()


def show(name, t):
    print(f"{name}:", [round(v, 6) for v in t.detach().flatten().tolist()])


idx = torch.tensor([[0, 2, 0], [3, 0, 2]])
coef = torch.arange(18.0).view(2, 3, 3) / 10.0 - 0.5  # a gradient that differs per element

for label, kw in [("renorm2", dict(max_norm=1.0)), ("renorm1", dict(max_norm=1.5, norm_type=1.0)),
                  ("freq", dict(scale_grad_by_freq=True)),
                  ("all", dict(max_norm=1.5, norm_type=1.0, scale_grad_by_freq=True, padding_idx=2))]:
    w = weight()
    y = F.embedding(idx, w, **kw)
    (y * coef).sum().backward()
    show(label + " out", y)
    show(label + " weight after", w)
    show(label + " grad", w.grad)
