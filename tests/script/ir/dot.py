# RUN: dot f
# kiln dot: the function's graph as Graphviz.
from torch import Tensor


def f(x: Tensor) -> Tensor:
    return x.relu() + 1
# CHECK: digraph
# CHECK: relu
# CHECK: add
