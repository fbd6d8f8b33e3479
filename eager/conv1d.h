#pragma once
// torch.nn.functional.conv1d, as conv2d over an inserted height of 1.
#include <cstdint>

#include "core/tensor.h"

namespace kiln {

// x: (N, C_in, L) or unbatched (C_in, L); weight: (C_out, C_in / groups, K)
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, int64_t stride = 1, int64_t padding = 0,
              int64_t dilation = 1, int64_t groups = 1);

}  // namespace kiln
