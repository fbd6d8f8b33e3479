# error: 11:9: cannot change list 'xs' inside an if or a loop while 'ys' names the same list: kiln script keeps two names of one list linked in straight-line code only; build 'ys' as a list of its own
import torch
from torch import Tensor
from typing import List


def f(x: Tensor) -> int:
    xs: List[int] = [1, 2]
    ys = xs
    for i in range(3):
        xs.append(i)
    return len(ys)
