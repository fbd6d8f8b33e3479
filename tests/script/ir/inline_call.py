# RUN: ir outer
# Calls between the file's functions are inlined: no call node, the callee's ops appear in place.
from torch import Tensor
from typing import Tuple


def outer(x: Tensor) -> Tensor:
    a, b = pair(x)
    return a * b


def pair(x: Tensor) -> Tuple[Tensor, Tensor]:
    return x.relu(), x.sigmoid()
# CHECK-LABEL: graph(%x : Tensor):
# CHECK-NEXT: %a : Tensor = relu(%x)
# CHECK-NEXT: %b : Tensor = sigmoid(%x)
# CHECK-NEXT: %{{.*}} : Tuple[Tensor, Tensor] = prim::TupleConstruct(%a, %b)
# CHECK-NEXT: %[[R:.*]] : Tensor = mul(%a, %b)
# CHECK-NEXT: return (%[[R]])
