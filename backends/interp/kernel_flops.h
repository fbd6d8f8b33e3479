#pragma once
// What the profiler counts for a node an executor ran as one compiled kernel, which the dispatcher
// never sees: the flops of every op it fused, by the profiler's formulas (eager/profiler/flops.h).
#include <cstdint>
#include <vector>

#include "core/ir/graph.h"
#include "core/ir/ivalue.h"

namespace kiln::interp {

// A fusion group's ops are counted at their static shapes, with symbolic dims bound from the group's
// runtime inputs and outputs; an op node is counted from its runtime tensors.
int64_t kernel_flops(const ir::Node& n, const std::vector<IValue>& inputs, const std::vector<IValue>& outputs);

}  // namespace kiln::interp
