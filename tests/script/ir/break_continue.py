# RUN: ir f
# break and continue: a `broke` flag carried through the loop and a per-iteration `continued` flag;
# the statements after each may-exit statement run under If(flag), and the loop goes on while not broke.
from torch import Tensor


def f(x: Tensor, n: int) -> Tensor:
    for i in range(n):
        if i == 1:
            continue
        if i == 4:
            break
        x = x + i
    return x
# CHECK-LABEL: graph(%x : Tensor, %n : int):
# CHECK: %broke : bool = prim::Constant[value=false]()
# CHECK: %x.1 : Tensor, %broke.1 : bool = prim::Loop(%trip, %{{.*}}, %x, %broke)
# CHECK-NEXT: block0(%iter : int, %x.2 : Tensor, %broke.2 : bool):
# CHECK-NEXT: %continued : bool = prim::Constant[value=false]()
# CHECK: %continued.1 : bool = prim::If(
# CHECK: prim::If(%continued.1)
# CHECK: %[[B:.*]] : bool = prim::If(
# CHECK: = prim::If(%[[B]])
# CHECK: add(%x.2,
# The next trip happens only when the body did not break.
# CHECK: %[[GO:.*]] : bool = prim::If(%broke.
# CHECK-NEXT: block0():
# CHECK-NEXT: prim::Constant[value=false]()
# CHECK: -> (%[[GO]], %x.{{.*}}, %broke.{{.*}})
# CHECK: return (%x.1)
