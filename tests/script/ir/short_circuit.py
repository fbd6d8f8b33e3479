# RUN: ir f
# `and` / `or` short-circuit through prim::If; a tensor operand becomes bool via prim::bool.
from torch import Tensor


def f(x: Tensor, n: int) -> bool:
    return n > 0 and bool(x.sum() > 0) or n == -1
# CHECK-LABEL: graph(%x : Tensor, %n : int):
# CHECK: %[[A:.*]] : bool = prim::gt(%n,
# CHECK: %[[AND:.*]] : bool = prim::If(%[[A]])
# CHECK-NEXT: block0():
# CHECK: sum[{{.*}}](%x)
# CHECK: prim::bool(
# CHECK: block1():
# CHECK-NEXT: prim::Constant[value=false]()
# CHECK: %[[OR:.*]] : bool = prim::If(%[[AND]])
# CHECK-NEXT: block0():
# CHECK-NEXT: prim::Constant[value=true]()
# CHECK: block1():
# CHECK: prim::eq(%n,
# CHECK: return (%[[OR]])
