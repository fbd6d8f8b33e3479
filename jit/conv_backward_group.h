#pragma once
// Conv-backward groups: prim::FusionGroup nodes of kind "conv_backward" (made by
// jit/passes/fuse_conv_backward.cpp) whose block holds two or three of conv2d_backward_input,
// conv2d_backward_weight and the bias gradient's sum over dims 0, 2, 3, all reading one gradient (its
// first argument). The executor runs them as one pass over that gradient (eager/cpu/conv_backward.h);
// the interpreter runs the block as it runs any, and so does the kernel for operands the pass does not
// take (another device or dtype).
#include <memory>
#include <string>

#include "core/ir/graph.h"
#include "jit/group_kernel.h"

namespace kiln::jit {

// sum[dims=[0, 2, 3] (or negative spellings), keepdim=false] of a 4-D tensor: a conv's bias gradient.
bool is_conv_bias_sum(const ir::Node& n);

// The kernel for a conv-backward group's standalone graph (group_graph()). Null, with the reason in
// *why_not, when the block is not such a group.
std::shared_ptr<GroupKernel> compile_conv_backward_group(const ir::Graph& group, const std::string& name,
                                                         std::string* why_not);

}  // namespace kiln::jit
