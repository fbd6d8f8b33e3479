// conv1d is conv2d with a height of 1 inserted before the length (input and kernel), so it shares
// conv2d's kernels, its backward and its JIT lowering (eager/composites.h).
#include "eager/conv1d.h"

#include "eager/composites.h"

namespace kiln {

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, const ConvPadding& padding,
              int64_t dilation, int64_t groups, const std::string& padding_mode) {
  EagerBuilder b;
  return composite::conv1d(b, x, weight, bias, stride, padding, dilation, groups, padding_mode);
}

}  // namespace kiln
