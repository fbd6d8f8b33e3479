#pragma once
// Small questions the passes ask of the IR.
#include <functional>
#include <optional>

#include "core/ir/graph.h"
#include "core/ir/match.h"

namespace kiln::jit {

using ir::argument_index;
using ir::is_conv_bias_sum;
using ir::is_zero_constant;
using ir::tensor_constant;

// No effect but its outputs: safe to delete when unused, to merge with an equal node, to hoist.
// prim::raise and prim::unwrap (which raises on None) are not, nor is anything holding them.
bool is_pure(const ir::Node& n);
// Calls f on every node of b and of the blocks nested in it, in order.
void for_each_node(const ir::Block& b, const std::function<void(ir::Node*)>& f);
// Sums f over b and every block nested in it, innermost first, so a rewrite of b sees its nested blocks
// already rewritten. A fusion group's block is its kernel's business and is not entered.
int64_t sum_over_blocks(ir::Block& b, const std::function<int64_t(ir::Block&)>& f);
// The value of a one-element tensor constant or a number constant.
std::optional<double> scalar_constant(const ir::Value* v);
bool is_constant(const ir::Value* v);
// Elementwise: a Unary or Binary row, or where.
bool is_elementwise(const ir::Node& n);
// The type of flash_attention's second output, each query row's log-sum-exp ([..., L], float32 or float64),
// from its first's ([..., L, Ev], the inputs' dtype).
ir::Type flash_attention_lse_type(const ir::Type& out);

}  // namespace kiln::jit
