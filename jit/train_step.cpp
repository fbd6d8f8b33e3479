#include "jit/train_step.h"

#include <algorithm>

#include "core/log.h"

#include "eager/autograd/engine.h"
#include "eager/nn/module.h"
#include "eager/ops.h"
#include "eager/optim/optimizer.h"
#include "jit/joint_graph.h"
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
    if (dismissed_) return;
    NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(saved_[i]);
  }
  RestoreBuffers(const RestoreBuffers&) = delete;
  RestoreBuffers& operator=(const RestoreBuffers&) = delete;
  void dismiss() { dismissed_ = true; }

 private:
  std::vector<Tensor> buffers_, saved_;
  bool dismissed_ = false;
};

// The train/eval flag of every module in the tree, depth first: a trace bakes in one mode's path
// (a dropout mask or none, batch or running statistics), so each combination is an entry of its own.
void collect_modes(const nn::Module& m, std::vector<bool>& out) {
  out.push_back(m.is_training());
  for (const auto& [name, child] : m.named_children()) collect_modes(*child, out);
}
void check_scalar(const Tensors& out) {
  if (out.size() != 1 || out[0].numel() != 1)
    fail("compile_train_step: the loss function must return one scalar, got {} outputs{}", out.size(),
         out.empty() ? std::string() : " of shape " + shape_str(out[0].sizes()));
}

// The first call of an entry runs the step eagerly once, and that run is at once the trace of its
// forward and loss, the recording of its joint graph (the engine's gradient formulas as they run) and
// the step itself: its loss and gradients are eager's, the optimizer updates from them, and the
// compiled graphs serve from the next call. Tracing and then running the compiled step would run the
// forward three times (trace, joint recording, compiled) and touch each graph's memory for the first
// time within the first call.
struct FirstStep {
  Function fn;           // the compiled trace, its forward+backward entry for this batch given
  Tensor loss;           // undefined: the run could not serve as the step (it left no trace), run fn
  Tensors params, grads;  // the step's gradients, of the trace's inputs that require grad
};

// Gradients as the engine's AccumulateGrad leaves them (contiguous for a contiguous leaf, added to one
// already there).
void accumulate_grads(const Tensors& params, const Tensors& grads) {
  for (size_t k = 0; k < params.size(); ++k) {
    if (!grads[k].defined()) continue;
    const Tensor& p = params[k];
    Tensor g = grads[k].detach();
    Tensor now = p.grad();
    if (!now.defined() && p.is_contiguous() && !g.is_contiguous()) g = g.contiguous();
    Tensor sum = now.defined() ? add(now, g) : g;
    set_memory_category(sum, MemoryCategory::Gradient);
    p.set_grad(sum);
  }
}

// Hooks on a leaf run in backward(), which a recorded grad() does not reach (DDP's all-reduce, FSDP's
// reduce-scatter), and only a leaf's .grad is written: other state traces and runs compiled as before.
bool plain_leaf(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  return !m || (!m->grad_fn && m->hooks.empty() && m->post_accumulate_grad_hooks.empty());
}

FirstStep record_first_step(nn::Module& model, const CompiledTrainStep::LossFn& loss_fn, const Tensors& batch,
                            const jit::CompileOptions& options) {
  std::vector<std::pair<std::string, Tensor>> state = model.named_parameters();
  for (auto& b : model.named_buffers()) state.push_back(b);
  bool as_step = GradMode::enabled();
  for (const Tensor& t : batch) as_step = as_step && !t.requires_grad();
  for (auto& [name, t] : state) as_step = as_step && plain_leaf(t);
  // Put back when the run does not serve as the step: the compiled call then draws dropout's masks and
  // moves BatchNorm's running statistics itself.
  RestoreBuffers buffers(model);
  struct RestoreRng {
    RngState saved = get_rng_state();
    bool dismissed = false;
    ~RestoreRng() {
      if (!dismissed) set_rng_state(saved);
    }
  } rng;

  tracing::Recorder rec("train_step", /*silent=*/true);  // quiet: size reads only specialise to this batch, the key
  rec.set_guard_value_reads(true);
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
  FirstStep r;
  // The recording goes on with the backward: the Function keeps a copy of the forward alone.
  r.fn = compile(Function(traced.graph().copy(), traced.name(), traced.binding()), options);
  as_step = as_step && loss.numel() == 1 && loss.requires_grad() && is_floating(loss.dtype());
  if (!as_step) return r;

  std::vector<IValue> inputs(batch.begin(), batch.end());
  inputs.insert(inputs.end(), bound.begin(), bound.end());
  jit::JointGraph j;
  j.num_primals = inputs.size();
  j.num_forward_outputs = rec.graph()->outputs().size();
  j.tangent_of = {0};
  Tensor tangent = ones_like(loss);
  rec.add_input(tangent, "grad_0");
  for (size_t i = 0; i < bound.size(); ++i)
    if (bound[i].requires_grad()) {
      r.params.push_back(bound[i]);
      j.grad_of.push_back(batch.size() + i);
    }
  {
    tracing::TraceScope scope(rec);
    r.grads = kiln::grad({loss}, r.params, {tangent}, /*retain_graph=*/false, /*create_graph=*/false,
                         /*allow_unused=*/true);
  }
  ir::Graph& jg = *rec.graph();
  std::vector<size_t> grad_of;
  for (size_t k = 0; k < r.grads.size(); ++k) {
    if (!r.grads[k].defined()) continue;  // unused: the parameter's .grad stays undefined, as in eager
    jg.register_output(rec.value_of(r.grads[k]));
    grad_of.push_back(j.grad_of[k]);
  }
  j.grad_of = std::move(grad_of);
  jit::finish_joint_graph(jg);
  j.graph = rec.graph();
  jit::add_train_entry(r.fn, inputs, j);
  r.loss = loss;
  buffers.dismiss();
  rng.dismissed = true;
  return r;
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
      FirstStep first = record_first_step(model_, loss_, batch, options_);
      e.fn = first.fn;
      if (first.loss.defined()) {
        check_scalar({first.loss});
        opt_.zero_grad();
        accumulate_grads(first.params, first.grads);
        if (before_step) before_step();
        opt_.step();
        return first.loss.detach();
      }
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
  check_scalar(out);
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
