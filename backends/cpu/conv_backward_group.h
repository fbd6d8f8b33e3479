#pragma once
// Conv-backward groups: prim::FusionGroup nodes of kind "conv_backward" (made by
// jit/passes/fuse_conv_backward.cpp) whose block holds two or three of conv2d_backward_input,
// conv2d_backward_weight and the bias gradient's sum over dims 0, 2, 3, all reading one gradient (its
// first argument). The executor runs them as one pass over that gradient (eager/cpu/conv_backward.h);
// the interpreter runs the block as it runs any, and so does the kernel for operands the pass does not
// take (another device or dtype).
#include <memory>
#include <string>

#include "backends/fusion_backend.h"
#include "core/ir/graph.h"

namespace kiln::backends::cpu {

// The kernel for a conv-backward group's standalone graph (its block as a graph of its own). Null, with the reason in
// *why_not, when the block is not such a group.
std::shared_ptr<FusedKernel> compile_conv_backward_group(const ir::Graph& group, const std::string& name,
                                                         std::string* why_not);

}  // namespace kiln::backends::cpu
