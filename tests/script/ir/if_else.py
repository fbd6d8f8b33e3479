# RUN: ir f
# An if/else whose branches assign y: one prim::If output, one value from each block.
from torch import Tensor


def f(x: Tensor, n: int) -> Tensor:
    if n > 0:
        y = x.relu()
    else:
        y = -x
    return y
# CHECK-LABEL: graph(%x : Tensor, %n : int):
# CHECK: prim::If
