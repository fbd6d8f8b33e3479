#pragma once
// One optimised graph ready to run: the pipeline's result, its fusion groups compiled by the backend
// (groups it declines stay on the interpreter) and a slot plan that drops values after their last use.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/interp/interpreter.h"
#include "jit/group_kernel.h"
#include "jit/pass_manager.h"

namespace kiln::jit {

struct CompiledGraph {
  std::string name;  // the profiler's scope for a run: "step_fwd"
  std::shared_ptr<ir::Graph> graph;
  std::unordered_map<const ir::Node*, std::shared_ptr<GroupKernel>> kernels;
  std::unique_ptr<interp::Plan> plan;
  std::vector<IValue> run(const std::vector<IValue>& inputs) const;
  std::vector<IValue> run(std::vector<IValue>&& inputs) const;  // inputs released after their last use
};

struct GroupCompileStats {
  int64_t kernels = 0;
  int64_t gemm_kernels = 0;  // gemm groups (GEMM + epilogue in one call)
  int64_t interpreted_groups = 0;
  std::vector<double> kernel_compile_ms;
};

// Runs the pipeline on g (in place) and compiles its fusion groups, naming kernels `name`_<group>.
std::shared_ptr<CompiledGraph> compile_graph(std::shared_ptr<ir::Graph> g, const std::string& name,
                                             const PipelineOptions& pipeline, const GroupCompiler& backend,
                                             GroupCompileStats& stats);

}  // namespace kiln::jit
