#pragma once
// The dims a reduction runs over and the shape it leaves, with the errors torch gives; shared by the
// CPU and CUDA reduction kernels.
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace kiln::cpu {

// mask[d]: dim d is reduced (every dim when dims is empty); raises on a repeated or bad dim.
std::vector<bool> reduce_mask(std::string_view op, const Tensor& x, const Shape& dims);
Shape reduced_shape(const Tensor& x, const std::vector<bool>& mask, bool keepdim);
// Raises when a reduced dim has size 0 (max/min have no identity).
void require_nonempty(std::string_view op, const Tensor& x, const std::vector<bool>& mask);

}  // namespace kiln::cpu
