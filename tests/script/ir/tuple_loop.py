# RUN: ir f
# A for over a tuple is unrolled: the body appears once per element, with no prim::Loop; tuple
# unpacking of a tuple built in place reads its elements directly.
from torch import Tensor


def f(x: Tensor) -> Tensor:
    a, b = x.relu(), x.tanh()
    acc = x
    for t in (a, b):
        acc = acc * t
    return acc
# CHECK-LABEL: graph(%x : Tensor):
# CHECK-NEXT: %a : Tensor = relu(%x)
# CHECK-NEXT: %b : Tensor = tanh(%x)
# CHECK-NOT: prim::Loop
# CHECK-NOT: prim::TupleUnpack
# CHECK-NOT: prim::TupleConstruct
# CHECK: %acc : Tensor = mul(%x, %a)
# CHECK-NEXT: %acc.1 : Tensor = mul(%acc, %b)
# CHECK-NEXT: return (%acc.1)
