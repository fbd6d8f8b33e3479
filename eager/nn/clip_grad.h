#pragma once
// Gradient clipping between backward and the optimizer step (torch.nn.utils.clip_grad_norm_ and
// clip_grad_value_): in place on each parameter's .grad; parameters without one are skipped.
#include <limits>
#include <vector>

#include "core/tensor.h"

namespace kiln::nn {

// Scales every gradient by max_norm / (total_norm + 1e-6) when that is below 1, total_norm being the
// norm_type-norm of all gradients together (inf: the largest magnitude). Returns total_norm (0-d,
// float32 or the gradients' dtype). error_if_nonfinite: a NaN or infinite total raises instead.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
constexpr double kInfNorm = std::numeric_limits<double>::infinity();

// Clamps every gradient into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace kiln::nn
