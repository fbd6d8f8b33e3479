# RUN: ir f
# Conditions on inlined arguments are decided while lowering, as TorchScript's constant propagation does:
# `x.is_cuda and p > 1.0` is False for p=0.5 whatever the tensor (the unknown operand only reads), so
# neither raise is lowered, and the ternary on `mode` lowers its taken side only.
from torch import Tensor


def scale(x: Tensor, p: float, mode: str) -> Tensor:
    if x.is_cuda and p > 1.0:
        raise ValueError("p > 1 on cuda")
    if mode not in ["row", "batch"] or p < 0.0:
        raise ValueError("bad mode")
    return x * p if mode == "row" and not p == 0 else x


def f(x: Tensor) -> Tensor:
    return scale(x, 0.5, "row")
# CHECK-LABEL: graph(%x : Tensor):
# CHECK-NOT: prim::If
# CHECK-NOT: prim::raise
# CHECK: mul
# CHECK-NOT: prim::If
# CHECK: return
