#pragma once
// The dtype a table op's first output has, from its inputs' types: the op table's rules
// (core/type_promotion.h) applied to IR values. One place for the verifier's check and the JIT's
// shape propagation.
#include <optional>

#include "core/ir/graph.h"

namespace kiln::ir {

// Nothing when an input's dtype (or, for promotion, its rank) is unknown. `others_keep_first`: ops
// without a rule of their own (matmul, conv, pools, index and gradient ops) return their first
// input's dtype — what their kernels do, but not a rule the verifier holds graphs to.
std::optional<DType> op_result_dtype(const Node& n, bool others_keep_first);

}  // namespace kiln::ir
