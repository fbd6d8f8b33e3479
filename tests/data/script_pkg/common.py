import torch

EPS, (LO, HI) = 1e-3, (-2.0, 2.0)


def clip(x, lo: float, hi: float):
    return torch.clamp(x, lo, hi)
