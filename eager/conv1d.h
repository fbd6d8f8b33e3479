#pragma once
// torch.nn.functional.conv1d, as conv2d over an inserted height of 1.
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "eager/ops.h"

namespace kiln {

// x: (N, C_in, L) or unbatched (C_in, L); weight: (C_out, C_in / groups, K); padding an int, "same" or "valid",
// padding_mode as conv2d's (eager/ops.h)
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, int64_t stride = 1, const ConvPadding& padding = 0,
              int64_t dilation = 1, int64_t groups = 1, const std::string& padding_mode = "zeros");

}  // namespace kiln
