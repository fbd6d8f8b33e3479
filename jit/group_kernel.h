#pragma once
// What the executor needs from a backend: a compiled fusion group it can run on tensors. Backends
// register a compiler; without one (or when it declines a group) the group runs on the interpreter.
#include <functional>
#include <memory>
#include <string>

#include "core/ir/graph.h"

namespace kiln::jit {

class GroupKernel {
 public:
  virtual ~GroupKernel() = default;
  virtual const std::string& name() const = 0;
  virtual Tensors run(const Tensors& inputs) const = 0;
};

// Returns null and says why when the backend cannot compile the group.
using GroupCompiler =
    std::function<std::shared_ptr<GroupKernel>(const ir::Graph& group, const std::string& name, std::string* why_not)>;

// The standalone graph of a prim::FusionGroup's block: what a backend compiles.
std::unique_ptr<ir::Graph> group_graph(const ir::Node& group);

}  // namespace kiln::jit
