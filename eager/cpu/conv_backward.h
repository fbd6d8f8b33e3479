#pragma once
// conv2d's gradients from one grad_output in one pass: the JIT's conv-backward groups
// (backends/cpu/conv_backward_group.cpp) run it where conv2d_backward_input, conv2d_backward_weight and the
// bias gradient's sum each read the same gradient, and each of the first two would gather it to
// channel-major and unfold into a column matrix of its own.
#include <optional>

#include "core/attrs.h"
#include "core/tensor.h"

namespace kiln::cpu {

struct ConvGrads {
  Tensor input, weight, bias;  // undefined where not asked for
};

// grad [N,O,OH,OW] of conv2d[attrs] (stride, padding, dilation, groups) of an input of input_shape
// [N,C,H,W] and a weight of weight_shape: x (that input) is read for the weight gradient, w for the
// input gradient; the bias gradient is grad summed over dims 0, 2, 3 (in double, as sum does). Nothing
// when the operands are not ones it computes (another device or dtype, a 3-D input): the caller runs
// the ops instead. Results equal the ops' kernels' but for the bias sum's order.
std::optional<ConvGrads> conv2d_backward(const Tensor& grad, const Tensor& x, const Tensor& w, const Shape& input_shape,
                                         const Shape& weight_shape, const Attrs& attrs, bool need_input,
                                         bool need_weight, bool need_bias);

}  // namespace kiln::cpu
