#pragma once
// Floating-point operations per op of the table, from its inputs, attributes and outputs. What counts
// (docs/profiler.md): a multiply-add is 2, as torch.utils.flop_counter counts matmul and conv;
// elementwise ops 1 per output element (transcendentals too); reductions 1 per input element; pools
// 1 per window element; views, copies, casts and gathers 0.
#include <cstdint>
#include <vector>

#include "core/attrs.h"
#include "core/op.h"
#include "core/shape.h"

namespace kiln {

class Tensor;

int64_t op_flops(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs, const std::vector<Tensor>& outputs);
// The same from shapes alone: what a compiled kernel's profile counts for each op of its fused block.
int64_t op_flops(OpId op, const std::vector<Shape>& inputs, const Attrs& attrs, const std::vector<Shape>& outputs);
// A GEMM's or a convolution's (and its gradients') flops from the inputs alone, before it runs, by the same
// formulas (the interpreter sizes its thread use by them); -1 for the other ops.
int64_t gemm_flops_before_run(OpId op, const std::vector<Shape>& inputs, const Attrs& attrs);
int64_t gemm_flops_before_run(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs);

}  // namespace kiln
