#pragma once
// Steps that take a tensor over: a prim::slice_scatter / prim::select_scatter whose base is a value of
// its own block read by no later step (the script lowering rebinds every name that aliased the base to
// the scatter's result, so this is its last use), and a prim::Loop whose carried input dies there. Once
// such a step has read its inputs, the executor drops the block's values dead by then, so the tensor is
// unshared unless something live holds it (a caller's handle, a constant, a view, autograd), which
// only the run can tell (eager/slice_scatter.h checks it, and writes into the base when it is).
#include <cstddef>
#include <vector>

#include "core/ir/graph.h"

namespace kiln::interp {

struct Takeover {
  size_t step;                          // the step's index in its block
  std::vector<const ir::Value*> dead;   // the block's values to drop once the step has read its inputs
};

// The takeovers among b's steps (its nested blocks are asked separately), in step order.
std::vector<Takeover> takeovers(const ir::Block& b);

}  // namespace kiln::interp
