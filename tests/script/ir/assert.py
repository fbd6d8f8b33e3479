# RUN: ir f
# assert: an If whose else block raises with the file, line and message.
from torch import Tensor


def f(x: Tensor, n: int) -> Tensor:
    assert n > 0, "n must be positive"
    return x * n
# CHECK-LABEL: graph(%x : Tensor, %n : int):
# CHECK: prim::If(
# CHECK-NEXT: block0():
# CHECK-NEXT: -> ()
# CHECK-NEXT: block1():
# CHECK-NEXT: prim::raise[message="{{.*}}assert.py:7: AssertionError: n must be positive"]()
