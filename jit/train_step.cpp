#include "jit/train_step.h"

#include <algorithm>

#include "core/log.h"

#include "backends/fusion_backend.h"
#include "eager/autograd/engine.h"
#include "eager/nn/module.h"
#include "eager/ops.h"
#include "eager/optim/optimizer.h"
#include "jit/joint_graph.h"
#include "jit/passes/shape_prop.h"
#include "tracer/recorder.h"
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
// The first call of an entry traces the step's forward and loss and, in the same eager run, records
// the backward (the engine's grad() under the same recorder): the trace and the joint graph at once, so
// the compiled function does not run the forward again on the interpreter to record its own. The call
// then runs the compiled step, as every later one does: a process that starts at a checkpoint computes
// its steps bit for bit as one that never stopped (an eager first step would round otherwise).
// Hooks on a leaf (DDP's all-reduce) and inputs requiring grad are left to the compiled function's
// own recording, which sees them as a call does.
bool plain_leaf(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  return !m || (!m->grad_fn && m->hooks.empty() && m->post_accumulate_grad_hooks.empty());
}

// shapes_only: the recorder gives fresh outputs without running their kernels (tracer/recorder.h).
Function record_step(nn::Module& model, const CompiledTrainStep::LossFn& loss_fn, const Tensors& batch,
                     const jit::CompileOptions& options, bool shapes_only) {
  std::vector<std::pair<std::string, Tensor>> state = model.named_parameters();
  for (auto& b : model.named_buffers()) state.push_back(b);
  bool joint = GradMode::enabled();
  for (const Tensor& t : batch) joint = joint && !t.requires_grad();
  for (auto& [name, t] : state) joint = joint && plain_leaf(t);
  // The run leaves no trace: the compiled call draws dropout's masks and moves BatchNorm's running
  // statistics itself.
  RestoreBuffers buffers(model);
  RestoreRngState rng;

  tracing::Recorder rec("train_step", /*silent=*/true);  // quiet: size reads only specialise to this batch, the key
  rec.set_guard_value_reads(true);
  if (shapes_only) rec.set_shapes_only(&jit::op_output_dims);
  for (size_t i = 0; i < batch.size(); ++i) rec.add_input(batch[i], fmt::format("x{}", i));
  Tensors bound;
  for (const auto& [name, t] : state) {
    rec.add_input(t, name);
    bound.push_back(t);
  }
  Tensor loss;
  {
    tracing::TraceScope scope(rec);
    loss = loss_fn(batch);
  }
  Function traced = rec.finish({loss}, bound);
  // The recording goes on with the backward: the Function keeps a copy of the forward alone.
  Function fn = compile(Function(traced.graph().copy(), traced.name(), traced.binding()), options);
  if (!(joint && loss.numel() == 1 && loss.requires_grad() && is_floating(loss.dtype()))) return fn;

  std::vector<IValue> inputs(batch.begin(), batch.end());
  inputs.insert(inputs.end(), bound.begin(), bound.end());
  jit::JointGraph j;
  j.num_primals = inputs.size();
  j.num_forward_outputs = rec.graph()->outputs().size();
  j.tangent_of = {0};
  Tensor tangent = ones_like(loss);
  rec.add_input(tangent, "grad_0");
  Tensors params;
  for (size_t i = 0; i < bound.size(); ++i)
    if (bound[i].requires_grad()) {
      params.push_back(bound[i]);
      j.grad_of.push_back(batch.size() + i);
    }
  Tensors grads;
  {
    tracing::TraceScope scope(rec);
    grads = kiln::grad({loss}, params, {tangent}, /*retain_graph=*/false, /*create_graph=*/false,
                       /*allow_unused=*/true);
  }
  ir::Graph& jg = *rec.graph();
  std::vector<size_t> grad_of;
  for (size_t k = 0; k < grads.size(); ++k) {
    if (!grads[k].defined()) continue;  // unused: the parameter's .grad stays undefined, as in eager
    jg.register_output(rec.value_of(grads[k]));
    grad_of.push_back(j.grad_of[k]);
  }
  j.grad_of = std::move(grad_of);
  jit::finish_joint_graph(jg);
  j.graph = rec.graph();
  jit::add_train_entry(fn, inputs, j);
  return fn;
}

// Recording the step without its values halves the first call's work: its eager run was a whole step
// beside the compiled one. What needs the values (a read into C++, a computed constant) records again with
// them, and so does an error: raised again there, it reports what the values say.
Function record_first_step(nn::Module& model, const CompiledTrainStep::LossFn& loss_fn, const Tensors& batch,
                           const jit::CompileOptions& options, bool shapes_only, int64_t& value_recordings) {
  if (shapes_only) {
    // the recording computes no GEMM now, so the GEMM library's one-time set-up can run beside it
    if (std::all_of(batch.begin(), batch.end(), [](const Tensor& t) { return t.device().is_cpu(); }))
      backends::warm_up_in_background(Device::Type::CPU);
    try {
      return record_step(model, loss_fn, batch, options, true);
    } catch (const tracing::ValuesNeeded& e) {
      kiln::logger().debug("compile_train_step: recording with values: {}", e.what());
    } catch (const Error& e) {
      kiln::logger().debug("compile_train_step: recording with values after: {}", e.what());
    }
  }
  ++value_recordings;
  return record_step(model, loss_fn, batch, options, false);
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
  auto e = std::make_unique<Entry>();  // its fn comes from the call's own eager run (operator())
  e->sig = std::move(sig);
  e->modes = std::move(modes);
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
    if (!e.fn.defined()) {
      ++traces_;
      e.fn = record_first_step(model_, loss_, batch, options_, record_shapes_only, value_recordings_);
    }
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
