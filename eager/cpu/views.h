#pragma once
// Helpers shared by the view kernels and Tensor::view.
#include <optional>

#include "core/tensor.h"

namespace kiln::cpu {

// Resolves one -1 and checks the element count; raises "<op>: shape [3,5] is invalid for input of size 16".
Shape infer_shape(const char* op, const Shape& shape, int64_t numel);
// Strides that view `x` as `shape` without copying, when its memory layout allows (torch's rule).
std::optional<Shape> view_strides(const Tensor& x, const Shape& shape);
// A tensor sharing x's storage with other sizes, strides and offset.
Tensor make_view(const Tensor& x, Shape sizes, Shape strides, int64_t offset);

}  // namespace kiln::cpu
