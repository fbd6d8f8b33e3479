from typing import Optional

import numpy as np  # never evaluated: nothing kiln reads uses it

SCALE = 0.5
UNUSED = np.ones(3)


# torchvision's, as published
def _make_divisible(v: float, divisor: int, min_value: Optional[int] = None) -> int:
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    # Make sure that round down does not go down by more than 10%.
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v
