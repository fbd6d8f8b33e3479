#pragma once
// The reference executor: runs any graph, control flow included, one node at a time on the eager
// dispatcher (so autograd records as it would in eager code). Every other backend is tested
// against it.
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/ir/graph.h"
#include "core/ir/ivalue.h"

namespace kiln::interp {

// Lets an executor take over some nodes (the JIT runs fusion groups as compiled kernels) and
// release values after their last use; everything else runs as in the interpreter.
class NodeRunner {
 public:
  virtual ~NodeRunner() = default;
  // Returns false to let the interpreter run the node.
  virtual bool run(const ir::Node& n, const std::vector<IValue>& inputs, std::vector<IValue>& outputs) = 0;
};

struct InputReads;

// A graph prepared for repeated runs: its values numbered into slots, each block's nodes listed
// with the slots they read and write, and (optionally) where each top-level value dies.
class Plan {
 public:
  explicit Plan(const ir::Graph& g, bool free_dead_values = false);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  const ir::Graph& graph() const { return graph_; }
  int num_slots() const { return num_slots_; }
  struct Step;
  struct BlockPlan;
  const BlockPlan& block_plan(const ir::Block& b) const;
  // False when a constant tensor requires grad or lives off the CPU: calls then run sequentially.
  bool constants_allow_interop() const { return constants_allow_interop_; }
  // Which top-level steps read each graph input (input_reads.h), worked out on first use.
  const std::vector<InputReads>& input_reads() const;

 private:
  const ir::Graph& graph_;
  int num_slots_ = 0;
  bool constants_allow_interop_ = true;
  std::unordered_map<const ir::Block*, std::unique_ptr<BlockPlan>> blocks_;
  mutable std::once_flag reads_once_;
  mutable std::unique_ptr<std::vector<InputReads>> reads_;
};

// caller_results: the results from this index on go only to other graph runs (a training forward's values
// saved for its backward graph), which acquire the memory filled on demand that they read (demand_schedule.h).
std::vector<IValue> run(const Plan& plan, const std::vector<IValue>& inputs, NodeRunner* runner = nullptr,
                        size_t caller_results = SIZE_MAX);
// Takes the inputs over: with a plan that frees dead values, an input is released after its last use.
std::vector<IValue> run(const Plan& plan, std::vector<IValue>&& inputs, NodeRunner* runner = nullptr,
                        size_t caller_results = SIZE_MAX);

// Independent steps of a block run concurrently on the inter-op scheduler (interop_scheduler.h) unless
// this thread traces, profiles, records autograd for a call whose inputs require grad, is itself
// running a step of another graph, or a tensor is off the CPU; a runner must then be safe to call from
// several threads at once.

// Runs g on inputs (one per graph input) and returns one value per graph output. Errors from a
// node name it: `interp: line 4 (add): add: shapes [2] and [3] cannot be broadcast`. With
// free_dead_values, a top-level value is dropped after its last use so the caching allocator can
// hand its buffer to a later node.
std::vector<IValue> run(const ir::Graph& g, const std::vector<IValue>& inputs, NodeRunner* runner = nullptr,
                        bool free_dead_values = false);

}  // namespace kiln::interp
