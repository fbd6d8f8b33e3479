#pragma once
// The reference executor: runs any graph, control flow included, one node at a time on the eager
// dispatcher (so autograd records as it would in eager code). Every other backend is tested
// against it.
#include <vector>

#include "core/ir/graph.h"
#include "core/ir/ivalue.h"

namespace kiln::interp {

// Runs g on inputs (one per graph input) and returns one value per graph output. Errors from a
// node name it: `interp: line 4 (add): add: shapes [2] and [3] cannot be broadcast`.
std::vector<IValue> run(const ir::Graph& g, const std::vector<IValue>& inputs);

}  // namespace kiln::interp
