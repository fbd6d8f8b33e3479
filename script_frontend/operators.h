#pragma once
// What the lowering makes of Python's binary and comparison operators: on tensors and on numbers, and the
// verb its errors use ("cannot add Tensor and Tuple[int, int]").
#include <optional>
#include <string_view>

#include "core/ir/graph.h"
#include "core/op.h"
#include "script_frontend/py_ops.h"

namespace kiln::script {

struct Operator {
  std::string_view verb;       // "add"; empty: errors name the operator's spelling instead
  std::optional<OpId> tensor;  // the op-table row on tensors; none: lowered by hand (// and %)
  ir::Prim number;             // on two numbers; Prim::Op: not defined on numbers
};

// The row of a binary or comparison operator; null for the others (and for << >> ^, not lowered).
const Operator* find_operator(PyOp op);

}  // namespace kiln::script
