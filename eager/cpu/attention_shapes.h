#pragma once
// What flash_attention and its backward give, from their inputs' shapes alone, after the checks their kernels
// make (the same errors): a recording that does not run them (tracer/recorder.h's shapes-only mode) still
// records their outputs and raises what a run would.
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/op.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace kiln::cpu {

// op is OpId::FlashAttention (out, lse) or OpId::FlashAttentionBackward (dq, dk, dv).
std::vector<std::pair<Shape, DType>> flash_attention_outputs(OpId op, const Tensors& in);

}  // namespace kiln::cpu
