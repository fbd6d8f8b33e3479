#pragma once
// What the executor needs from a backend: a compiled fusion group it can run on tensors. A Backend
// (backends/fusion_backend.h: x86 for the CPU, CUDA for GPUs) says which nodes may join a group and
// compiles groups; when there is none, or it declines a group, the group runs on the interpreter.
#include <memory>
#include <string>

#include "backends/fusion_backend.h"
#include "core/ir/graph.h"

namespace kiln::jit {

using GroupKernel = backends::FusedKernel;
using Backend = backends::FusionBackend;

using GroupCompiler = backends::GroupCompiler;

// The standalone graph of a prim::FusionGroup's block: what a backend compiles.
std::unique_ptr<ir::Graph> group_graph(const ir::Node& group);

}  // namespace kiln::jit
