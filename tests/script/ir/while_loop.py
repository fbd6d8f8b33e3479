# RUN: ir f
# while: prim::Loop with the largest trip count, the condition evaluated before the loop and again
# at the end of each body; x and n are carried.
import torch
from torch import Tensor


def f(x: Tensor) -> int:
    n = 0
    while x.sum() > 1:
        x = x / 2
        n += 1
    return n
# CHECK-LABEL: graph(%x : Tensor):
# CHECK: %[[SUM:.*]] : Tensor = sum[{{.*}}](%x)
# CHECK: %[[C0:.*]] : bool = prim::bool(
# CHECK: %[[BIG:.*]] : int = prim::Constant[value=9223372036854775807]()
# CHECK: %n.1 : int, %x.1 : Tensor = prim::Loop(%[[BIG]], %[[C0]], %n, %x)
# CHECK-NEXT: block0(%iter : int, %n.2 : int, %x.2 : Tensor):
# CHECK: div(%x.2,
# CHECK: prim::add(%n.2,
# CHECK: sum[{{.*}}](%x.3)
# CHECK: %[[NEXT:.*]] : bool = prim::bool(
# CHECK-NEXT: -> (%[[NEXT]], %n.3, %x.3)
# CHECK: return (%n.1)
