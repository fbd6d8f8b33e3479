#include "jit/train_step.h"

#include <algorithm>

#include "core/log.h"

#include "eager/autograd/engine.h"
#include "eager/nn/module.h"
#include "eager/ops.h"
#include "eager/optim/optimizer.h"
#include "tracer/trace.h"

namespace kiln {

namespace {
std::string sig_str(const std::vector<std::pair<DType, Shape>>& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i)
    out += fmt::format("{}{}{}", i ? ", " : "", ir::dtype_short_name(s[i].first), shape_str(s[i].second));
  return "(" + out + ")";
}

// The module's buffers (BatchNorm's running statistics) as they were, written back at the end of a scope.
class RestoreBuffers {
 public:
  explicit RestoreBuffers(const nn::Module& m) {
    for (auto& [name, b] : m.named_buffers()) {
      buffers_.push_back(b);
      saved_.push_back(b.detach().clone());
    }
  }
  ~RestoreBuffers() {
    NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(saved_[i]);
  }
  RestoreBuffers(const RestoreBuffers&) = delete;
  RestoreBuffers& operator=(const RestoreBuffers&) = delete;

 private:
  std::vector<Tensor> buffers_, saved_;
};

// The train/eval flag of every module in the tree, depth first: a trace bakes in one mode's path
// (a dropout mask or none, batch or running statistics), so each combination is an entry of its own.
void collect_modes(const nn::Module& m, std::vector<bool>& out) {
  out.push_back(m.is_training());
  for (const auto& [name, child] : m.named_children()) collect_modes(*child, out);
}
}  // namespace

CompiledTrainStep::CompiledTrainStep(nn::Module& model, LossFn loss, optim::Optimizer& opt, jit::CompileOptions o)
    : model_(model), loss_(std::move(loss)), opt_(opt), options_(std::move(o)) {
  if (!loss_) fail("compile_train_step: no loss function given");
}

CompiledTrainStep::Entry& CompiledTrainStep::entry_for(const std::vector<Tensor>& batch) {
  std::vector<std::pair<DType, Shape>> sig;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].defined()) fail("compile_train_step: batch element {} is an undefined tensor", i);
    sig.emplace_back(batch[i].dtype(), batch[i].sizes());
  }
  std::vector<bool> modes;
  collect_modes(model_, modes);
  if (last_ && last_->sig == sig && last_->modes == modes) return *last_;
  for (auto& e : entries_)
    if (e->sig == sig && e->modes == modes) return *(last_ = e.get());
  if (!entries_.empty()) {
    bool same_batch = std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e->sig == sig; });
    if (same_batch)
      kiln::logger().info("compile_train_step: tracing again: the modules' train/eval flags differ from the traced ones");
    else
      kiln::logger().info("compile_train_step: tracing again: batch signature {} differs from {}", sig_str(sig),
                          sig_str(entries_.back()->sig));
  }
  auto e = std::make_unique<Entry>();
  e->sig = std::move(sig);
  e->modes = std::move(modes);
  e->fn = trace_step(batch);
  entries_.push_back(std::move(e));
  return *(last_ = entries_.back().get());
}

Function CompiledTrainStep::trace_step(const std::vector<Tensor>& batch) {
  TraceOptions to;
  to.name = "train_step";
  to.quiet = true;  // size reads only specialise the trace to this batch shape, which is what we key on
  to.guard_value_reads = true;
  ++traces_;
  // Tracing runs the step's forward eagerly, then the compiled call runs it for this batch: the trace's
  // own run must leave no trace, or BatchNorm's running statistics would move twice and dropout's masks
  // come from further along the random stream than eager's.
  RestoreBuffers buffers(model_);
  RestoreRngState rng;
  return compile(trace_module(model_, [this](const Tensors& b) { return Tensors{loss_(b)}; }, batch, to), options_);
}

Tensor CompiledTrainStep::operator()(const std::vector<Tensor>& batch) {
  Tensors out;
  if (eager_) {
    out = {loss_(batch)};
  } else {
    Entry& e = entry_for(batch);
    RngState rng = get_rng_state();
    try {
      out = e.fn(batch);
    } catch (const GuardFailure& g) {
      set_rng_state(rng);  // the failed forward's draws are not the step's
      // The forward ran but nothing of it is used: no backward, no update, no buffer write-back.
      if (++guard_failures_ > guard_limit) {
        kiln::logger().warn("compile_train_step: {} guard failures (the loss function branches on tensor values every "
                     "call); running the step eagerly from now on",
                     guard_failures_);
        eager_ = true;
        out = {loss_(batch)};
      } else {
        kiln::logger().info("compile_train_step: recompiling: {}", g.what());
        e.fn = trace_step(batch);
        out = e.fn(batch);
      }
    }
  }
  if (out.size() != 1 || out[0].numel() != 1)
    fail("compile_train_step: the loss function must return one scalar, got {} outputs{}", out.size(),
         out.empty() ? std::string() : " of shape " + shape_str(out[0].sizes()));
  opt_.zero_grad();
  backward({out[0]});
  if (before_step) before_step();
  opt_.step();
  return out[0].detach();
}

const Function& CompiledTrainStep::function() const {
  if (!last_) fail("compile_train_step: no step has run yet");
  return last_->fn;
}

}  // namespace kiln
