#pragma once
// Python's binary and comparison operators, a row each: what the lowering makes of them on tensors and
// on numbers, and the verb its errors use ("cannot add Tensor and Tuple[int, int]").
#include <optional>
#include <string_view>

#include "core/ir/graph.h"
#include "core/op.h"

namespace kiln::script {

struct Operator {
  std::string_view token;      // "+"
  std::string_view verb;       // "add"; empty: errors name the token instead
  std::optional<OpId> tensor;  // the op-table row on tensors; none: lowered by hand (// and %)
  ir::Prim number;             // on two numbers; Prim::Op: not defined on numbers
};

// The row of a token, or null for one that is not a binary or comparison operator.
const Operator* find_operator(std::string_view token);

}  // namespace kiln::script
