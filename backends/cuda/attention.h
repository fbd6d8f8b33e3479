#pragma once
// flash_attention and its backward (core/ops.def) on CUDA: one warp per query row walks the keys with the
// online softmax, so a head's [L,S] scores are never stored; the backward recomputes each score from the
// forward's log-sum-exp, dq per query row and dk, dv per key row (no atomics: the sums run in one order).
// The checks and shapes are the CPU kernels' (eager/cpu/attention_shapes.h), so both devices raise alike.
#include <string>
#include <utility>
#include <vector>

#include "core/attrs.h"
#include "core/dtype.h"
#include "core/op.h"
#include "core/tensor.h"

namespace kiln::cuda {

Tensors flash_attention(OpId op, const Tensors& in, const Attrs& attrs);
Tensors flash_attention_backward(OpId op, const Tensors& in, const Attrs& attrs);

// The kernels' CUDA C for each (q's dtype, per_lane): a warp's lanes hold `per_lane` elements of a row each
// (a power of two; rows up to 32 * per_lane wide).
std::string render_attention(const std::vector<std::pair<DType, int>>& variants);
// Every (dtype, per_lane) the kernels are rendered for at run time: what CI compiles with NVRTC.
std::vector<std::pair<DType, int>> attention_variants();

}  // namespace kiln::cuda
