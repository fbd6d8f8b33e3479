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
# CHECK: %[[C:.*]] : bool = prim::gt(%n,
# CHECK-NEXT: %y : Tensor = prim::If(%[[C]])
# CHECK-NEXT: block0():
# CHECK-NEXT: %[[A:.*]] : Tensor = relu(%x)
# CHECK-NEXT: -> (%[[A]])
# CHECK-NEXT: block1():
# CHECK-NEXT: %[[B:.*]] : Tensor = neg(%x)
# CHECK-NEXT: -> (%[[B]])
# CHECK-NEXT: return (%y)
