#pragma once
// scatter_add into zeros without a zero tensor to copy: what the JIT runs for scatter_add of a
// constant zero tensor (max_pool2d's and nll_loss's recorded backward; backends/cpu/scatter_zeros_group.cpp).
#include <optional>

#include "core/tensor.h"

namespace kiln::cpu {

// scatter_add(zeros(shape, dtype), dim, index, src), each row along dim zeroed as its values land.
// Nothing for what it does not compute (a dtype other than float32/float64, another device): the
// caller runs scatter_add. Errors are scatter_add's.
std::optional<Tensor> scatter_add_into_zeros(const Shape& shape, DType dtype, const Tensor& index, const Tensor& src,
                                             int64_t dim);

}  // namespace kiln::cpu
