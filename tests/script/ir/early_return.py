# RUN: ir f
# A return inside a loop: the `returned` and `ret_value` flags are carried through the loop, the loop
# stops once returned is true, and the code after the loop runs only when it is false.
from torch import Tensor


def f(x: Tensor, n: int) -> Tensor:
    for i in range(n):
        if i == 3:
            return x
        x = x + 1
    return -x
# CHECK-LABEL: graph(%x : Tensor, %n : int):
# CHECK: %returned : bool = prim::Constant[value=false]()
# CHECK: %ret_value : f32[] = prim::Constant
# CHECK: prim::Loop(%trip, %{{.*}}, %x, %returned, %ret_value)
# CHECK: block0(%iter : int, %x.{{.*}} : Tensor, %returned.{{.*}} : bool, %ret_value.{{.*}} : Tensor):
# CHECK: prim::If
# The loop's condition: false once returned.
# CHECK: prim::Constant[value=false]()
# CHECK: %[[AFTER:.*]] : Tensor, %{{.*}} : bool = prim::If(%returned.{{.*}})
# CHECK: neg(
# CHECK: return (%[[AFTER]])
