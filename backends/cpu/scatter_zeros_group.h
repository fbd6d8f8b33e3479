#pragma once
// Scatter-into-zeros groups: prim::FusionGroup nodes of kind "scatter_zeros" (made by
// jit/passes/fuse_scatter_zeros.cpp) whose block is a constant zero tensor and a scatter_add into it
// (max_pool2d's and nll_loss's recorded backward). The executor writes the result once, each row
// zeroed as its values land (eager/cpu/scatter.h), where scatter_add would copy the constant first;
// the interpreter runs the block as it runs any, and so does the kernel for operands it does not take.
#include <memory>
#include <string>

#include "backends/fusion_backend.h"
#include "core/ir/graph.h"

namespace kiln::backends::cpu {

// The kernel for a scatter-into-zeros group's standalone graph (its block as a graph of its own). Null, with the reason
// in *why_not, when the block is not such a group.
std::shared_ptr<FusedKernel> compile_scatter_zeros_group(const ir::Graph& group, const std::string& name,
                                                         std::string* why_not);

}  // namespace kiln::backends::cpu
