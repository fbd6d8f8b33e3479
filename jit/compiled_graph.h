#pragma once
// One optimised graph ready to run: the pipeline's result, its fusion groups compiled by the backend
// (groups it declines stay on the interpreter) and a slot plan that drops values after their last use.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/interp/interpreter.h"
#include "jit/group_kernel.h"
#include "jit/pass_manager.h"

namespace kiln::jit {

// The casts of a graph's parameters (autocast's weight casts, recorded by a trace): each result is kept and
// reused while the parameter's bytes are unchanged (same storage, view and version counter), as torch's
// autocast cast cache does within a scope, so an eval forward casts each weight once per weight version
// instead of once per call. Only inputs that are leaf tensors requiring grad (parameters) qualify: a data
// input's bytes may change behind the version counter (a reused from_blob buffer). Safe under concurrent runs.
class ParamCastCache {
 public:
  ParamCastCache() = default;
  explicit ParamCastCache(const ir::Graph& g);
  // The graph input each cached cast reads (through views), by cast node.
  const std::unordered_map<const ir::Node*, size_t>& casts() const { return casts_; }
  // The cast of x (the node's input, a view of a parameter) to the node's dtype: the kept one if x still
  // views the same bytes, else made and kept.
  Tensor cast(const ir::Node& n, const Tensor& x);
  size_t size() const;

 private:
  struct Entry {
    Tensor source, cast;
    uint64_t version = 0;
  };
  std::unordered_map<const ir::Node*, size_t> casts_;
  mutable std::mutex mu_;
  std::unordered_map<const ir::Node*, Entry> kept_;
};

struct CompiledGraph {
  std::string name;  // the profiler's scope for a run: "step_fwd"
  std::shared_ptr<ir::Graph> graph;
  std::unordered_map<const ir::Node*, std::shared_ptr<GroupKernel>> kernels;
  std::unique_ptr<interp::Plan> plan;
  std::unique_ptr<ParamCastCache> param_casts;
  // A training forward: its results from this index on are the values saved for the backward graph, whose
  // run acquires the memory filled on demand it reads (eager/on_demand.h), so this run may hand that back.
  size_t caller_results = SIZE_MAX;
  std::vector<IValue> run(const std::vector<IValue>& inputs) const;
  std::vector<IValue> run(std::vector<IValue>&& inputs) const;  // inputs released after their last use
};

struct GroupCompileStats {
  int64_t kernels = 0;
  int64_t gemm_kernels = 0;  // gemm groups (GEMM + epilogue in one call)
  int64_t interpreted_groups = 0;
  std::vector<double> kernel_compile_ms;
};

// Runs the pipeline on g (in place) and compiles its fusion groups, naming kernels `name`_<group>: a
// group marked with a kind (jit/group_kinds.h) by the kernels of `device` for that kind, the others by
// `backend` (empty: they are interpreted).
std::shared_ptr<CompiledGraph> compile_graph(std::shared_ptr<ir::Graph> g, const std::string& name,
                                             const PipelineOptions& pipeline, Device::Type device,
                                             const GroupCompiler& backend, GroupCompileStats& stats);

}  // namespace kiln::jit
