#pragma once
// Questions about a graph's values that a JIT pass marking a fusion group and the backend's kernel reading
// the group back both ask, so the two agree on what a kind of group holds.
#include <optional>

#include "core/ir/graph.h"

namespace kiln::ir {

// The tensor of a prim::Constant, or null.
const Tensor* tensor_constant(const Value* v);
// Which input of g (a group's standalone graph) v is, if any.
std::optional<size_t> argument_index(const Graph& g, const Value* v);
// A float32 or float64 constant whose every bit is zero (+0.0 everywhere: -0.0 would show through
// where nothing lands).
bool is_zero_constant(const Value* v);
// sum[dims=[0, 2, 3] (or negative spellings), keepdim=false] of a 4-D tensor: a conv's bias gradient.
bool is_conv_bias_sum(const Node& n);

}  // namespace kiln::ir
