#pragma once
// Whether an op's result may share its input's memory: torch's views, contiguous() of a contiguous tensor,
// a cast to the dtype it already has. The script frontend asks before writing in place, the interpreter
// before freeing memory a later step might still read.
#include "core/op.h"

namespace kiln::ir {

inline bool op_may_return_input(OpId op) {
  return op_info(op).kind == OpKind::View || op == OpId::Contiguous || op == OpId::Cast;
}

}  // namespace kiln::ir
