# RUN: ir f --after licm
# `kiln ir --after PASS` shows the JIT's pipeline on a script: the loop-invariant exp(w) leaves the loop.
import torch
from torch import Tensor


def f(x: Tensor, w: Tensor, n: int) -> Tensor:
    acc = x
    for i in range(n):
        acc = acc + torch.exp(w)
    return acc
# CHECK-LABEL: graph(%x : Tensor, %w : Tensor, %n : int):
# CHECK: = exp(%w)
# CHECK: prim::Loop(
# CHECK-NOT: exp
# CHECK: return
