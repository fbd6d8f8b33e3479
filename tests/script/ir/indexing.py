# RUN: ir f
# Tensor subscripts become select/slice/unsqueeze with attributes; `...` counts dims from the end;
# x.shape[i] is prim::size; a number meets a tensor through prim::tensor.
from torch import Tensor


def f(x: Tensor, k: int) -> Tensor:
    y = x[0, 1:3] + x[..., -1] * k
    return y[None] / x.shape[1]
# CHECK-LABEL: graph(%x : Tensor, %k : int):
# CHECK: select[dim=0, index=0](%x)
# CHECK: slice[dim=0, start=1, end=3](
# CHECK: select[dim=-1, index=-1](%x)
# CHECK: prim::tensor(%k)
# CHECK: unsqueeze[dim=0](%y)
# CHECK: prim::size(%x,
# CHECK: prim::tensor(
# CHECK: div(
