# RUN: ir f
# for i in range(a, b, 2): the trip count max(0, (b - a + 1) // 2) is computed before the loop and
# i = iter * 2 + a inside it.
from torch import Tensor


def f(x: Tensor, a: int, b: int) -> Tensor:
    for i in range(a, b, 2):
        x = x * i
    return x
# CHECK-LABEL: graph(%x : Tensor, %a : int, %b : int):
# CHECK: prim::sub(%b, %a)
# CHECK: prim::floordiv(
# CHECK: %trip : int = prim::max(
# CHECK: %x.1 : Tensor = prim::Loop(%trip, %{{.*}}, %x)
# CHECK-NEXT: block0(%iter : int, %x.2 : Tensor):
# CHECK: prim::mul(%iter,
# CHECK: %i : int = prim::add(%{{.*}}, %a)
# CHECK: prim::tensor(%i)
# CHECK: mul(%x.2,
# CHECK: return (%x.1)
