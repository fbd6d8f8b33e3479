#pragma once
// A whole training step compiled: forward and loss (traced with the module's parameters and buffers
// as graph inputs) run as a compiled forward graph, loss.backward() runs the compiled backward graph
// into each parameter's .grad, and the optimizer applies its single-pass fused update
// (eager/optim/fused_update.h) over all parameters.
//
//   optim::Adam opt(model.parameters(), {1e-3});
//   CompiledTrainStep step(model, [&](const Tensors& b) { return cross_entropy(model(b[0]), b[1]); }, opt);
//   for (...) double loss = step({x, y}).item<double>();
//
// A batch with other shapes (or dtypes) traces and compiles again, logged with the reason; each
// shape keeps its own entry. Values the loss function reads into C++ (item(), e.g. to branch on) are
// guarded: a call that sees another value than the trace did traces and compiles again before any
// backward or update runs (logged: `compile_train_step: recompiling: train_step: guard failed: ...`),
// so a stale graph never trains the model; after `guard_limit` such retraces the step runs eagerly.
#include <functional>
#include <memory>
#include <vector>

#include "backends/interp/function.h"
#include "jit/compiled_function.h"

namespace kiln {

namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}

class CompiledTrainStep {
 public:
  using LossFn = std::function<Tensor(const std::vector<Tensor>& batch)>;
  CompiledTrainStep(nn::Module& model, LossFn loss, optim::Optimizer& opt, jit::CompileOptions options = {});
  // One step on `batch`: zero_grad, forward, backward, optimizer step. Returns the loss (detached).
  Tensor operator()(const std::vector<Tensor>& batch);
  // The compiled function serving the last call (its cache statistics, graphs).
  const Function& function() const;
  int64_t traces() const { return traces_; }
  // Cache entries: one per batch signature (dtypes and shapes) and train/eval flags seen so far.
  size_t entries() const { return entries_.size(); }
  int64_t guard_failures() const { return guard_failures_; }
  // First calls that recorded the step with its values: record_shapes_only off, or a loss function that
  // needed them (a value read into C++).
  int64_t value_recordings() const { return value_recordings_; }
  bool running_eagerly() const { return eager_; }
  int guard_limit = 8;
  // The first call of an entry records the step's forward and backward from shapes alone, skipping the
  // kernels of ops whose outputs are fresh tensors (the compiled run computes the step). A loss function
  // that reads a value into C++ makes it record again with values. false: always record with values.
  bool record_shapes_only = true;
  // Runs after the backward has filled the parameters' .grad and before the optimizer step: gradient
  // clipping (nn::clip_grad_norm_, clip_grad_value_) or any other change to the gradients.
  std::function<void()> before_step;

 private:
  struct Entry {
    std::vector<std::pair<DType, Shape>> sig;
    std::vector<bool> modes;  // every module's training flag, depth first
    Function fn;
  };
  Entry& entry_for(const std::vector<Tensor>& batch);
  Function trace_step(const std::vector<Tensor>& batch);
  nn::Module& model_;
  LossFn loss_;
  optim::Optimizer& opt_;
  jit::CompileOptions options_;
  std::vector<std::unique_ptr<Entry>> entries_;
  Entry* last_ = nullptr;
  int64_t traces_ = 0, guard_failures_ = 0, value_recordings_ = 0;
  bool eager_ = false;
};

}  // namespace kiln
