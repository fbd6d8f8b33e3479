// conv1d is conv2d with a height of 1 inserted before the length (input and kernel), so it shares
// conv2d's kernels, its backward and its JIT lowering.
#include "eager/conv1d.h"

#include "core/error.h"
#include "core/shape.h"
#include "eager/ops.h"

namespace kiln {

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  if (x.dim() != 2 && x.dim() != 3)
    fail("conv1d: expected a 2D (unbatched) or 3D (batched) input, got shape {}", shape_str(x.sizes()));
  if (weight.dim() != 3) fail("conv1d: expected a 3D weight (out_channels, in_channels / groups, kernel), got shape {}",
                              shape_str(weight.sizes()));
  bool batched = x.dim() == 3;
  Tensor x4 = (batched ? x : x.unsqueeze(0)).unsqueeze(2);
  Tensor y = conv2d(x4, weight.unsqueeze(2), bias, {1, stride}, {0, padding}, {1, dilation}, groups).squeeze(2);
  return batched ? y : y.squeeze(0);
}

}  // namespace kiln
