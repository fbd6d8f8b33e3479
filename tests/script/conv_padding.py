"""F.conv2d / F.conv1d with torch's padding forms in functions ('same' with dilation and even kernels: the weight's
shape is known only when the graph runs, so the input is padded then), and F.pad's circular mode beside reflect and
replicate."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def convs(x: Tensor, w: Tensor, b: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    return F.conv2d(x, w, b, 1, 'valid'), F.conv2d(x, w, None, padding=(1, 2), dilation=2), torch.conv2d(x, w, b, 1, 1)


def conv1(x: Tensor, w: Tensor) -> Tuple[Tensor, Tensor]:
    return F.conv1d(x, w, padding='valid'), F.conv1d(x, w, None, 2, 1)


def same(x: Tensor, w: Tensor, b: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    return F.conv2d(x, w, b, padding='same'), F.conv2d(x, w, None, 1, 'same', (2, 3)), F.conv2d(x, w, b, padding='valid', dilation=2)


def same1(x: Tensor, w: Tensor) -> Tuple[Tensor, Tensor]:
    return F.conv1d(x, w, padding='same'), F.conv1d(x, w, None, 1, 'same', 3)


def pads(x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    return F.pad(x, [2, 1, 0, 3], mode='circular'), F.pad(x, [1, 2, 2, 1], mode='reflect'), F.pad(x, [0, 2, 1, 0], mode='replicate')


# CASE: convs randn(2,3,6,7) randn(4,3,2,3) randn(4)
# CASE: conv1 randn(2,3,9) randn(4,3,3)
# CASE: pads randn(2,3,4,5)
# CASE: same randn(2,3,7,8) randn(4,3,2,4) randn(4)
# CASE: same randn(1,3,6,6) randn(2,3,3,3) randn(2)
# CASE: same1 randn(2,3,9) randn(4,3,4)
