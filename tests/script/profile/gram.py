"""`kiln profile` on a scripted function: checked by tests/script/run_profile_check.sh."""
import torch
from torch import Tensor


def gram(x: Tensor, n: int) -> Tensor:
    h = torch.relu(torch.matmul(x, x.t()))
    for i in range(n):
        h = h + 1.0
    return h.sum()
