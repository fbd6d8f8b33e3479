#include "jit/compiled_function.h"

#include "core/log.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_map>

#include "backends/interp/interpreter.h"
#include "core/ir/verifier.h"
#include "eager/autograd/graph.h"
#include "jit/compiled_backward.h"
#include "jit/compiled_graph.h"
#include "jit/default_backend.h"
#include "jit/flat_tuples.h"
#include "jit/input_signature.h"
#include "jit/ir_utils.h"
#include "jit/joint_graph.h"
#include "jit/min_cut_partition.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

class CompiledFunction final : public Function::Executor {
 public:
  CompiledFunction(std::shared_ptr<const ir::Graph> graph, std::string name, CompileOptions o,
                   std::vector<bool> hidden_outputs)
      : source_(std::move(graph)), name_(std::move(name)), opts_(std::move(o)), hidden_(std::move(hidden_outputs)) {
    trainable_ = can_differentiate(*source_, &why_not_trainable_);
  }

  std::vector<IValue> run(const std::vector<IValue>& inputs) override {
    bool grad_mode = GradMode::enabled();
    if (!(grad_mode && any_requires_grad(inputs))) {
      if (std::shared_ptr<Entry> e = lookup(inputs, grad_mode)) return e->code->run(inputs);
      return entry_for(signature_of(inputs))->code->run(inputs);
    }
    if (trainable_) return run_training(inputs, train_entry_for(inputs));
    std::vector<IValue> flat = flatten_values(inputs);
    if (std::shared_ptr<TrainEntry> e = specialised_entry(flat))
      return nest_values(run_training(flat, e), flat_.output_types);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.eager_calls;
      if (!said_eager_) kiln::logger().info("{}: inputs require grad and the graph cannot be differentiated as a whole ({}); "
                                     "running on the interpreter so autograd records", name_, why_not_trainable_);
      said_eager_ = true;
    }
    return interp::run(*source_, inputs);
  }

  std::shared_ptr<const ir::Graph> graph_for(const std::vector<IValue>& inputs) {
    if (GradMode::enabled() && any_requires_grad(inputs)) {
      if (trainable_) return train_entry_for(inputs)->forward->graph;
      if (std::shared_ptr<TrainEntry> e = specialised_entry(flatten_values(inputs))) return e->forward->graph;
    }
    return entry_for(signature_of(inputs))->code->graph;
  }
  std::shared_ptr<const ir::Graph> backward_graph_for(const std::vector<IValue>& inputs) {
    if (!(GradMode::enabled() && any_requires_grad(inputs)))
      fail("{}: no backward graph: no input requires grad (or grad mode is off)", name_);
    if (trainable_) return train_entry_for(inputs)->backward->graph;
    if (std::shared_ptr<TrainEntry> e = specialised_entry(flatten_values(inputs))) return e->backward->graph;
    fail("{}: no compiled backward: {}", name_, why_not_trainable_);
  }

  CacheStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  // What compiles an entry: the user's backend if one was given, else the one of the device the
  // signature's tensors live on, whose can_fuse also shapes the fusion groups.
  struct Choice {
    Device::Type device;  // whose kernels run the marked groups
    GroupCompiler compile;
    PipelineOptions pipeline;
    std::string name;
  };
  Choice choose(const Signature& sig) const {
    std::vector<Device> devices;
    for (const InputSig& in : sig.inputs)
      if (in.kind == InputKind::Tensor) devices.push_back(in.device);
    Choice c{device_type_for(devices), opts_.backend, opts_.pipeline, opts_.backend ? "custom" : ""};
    if (opts_.backend || !opts_.use_default_backend) return c;
    const Backend* b = backend_for(devices);
    c.compile = compiler_of(b);
    if (!c.pipeline.backend) c.pipeline.backend = b;
    c.name = b ? std::string(b->name()) : "";
    return c;
  }

  struct Entry {
    Signature sig;
    std::shared_ptr<CompiledGraph> code;
  };
  // A differentiable call: the forward saves what the min cut chose, the backward runs from it.
  struct TrainEntry {
    Signature sig;
    std::shared_ptr<CompiledGraph> forward, backward;
    std::vector<size_t> tangent_of, grad_of;
    size_t num_outputs = 0;
    std::vector<bool> saved_is_primal;
  };

  static bool any_requires_grad(const std::vector<IValue>& inputs) {
    for (const IValue& v : inputs)
      if ((v.is_tensor() && v.to_tensor().requires_grad()) || (v.is_tuple() && any_requires_grad(v.elements())))
        return true;
    return false;
  }

  // The entry serving these inputs, most recently compiled first; null on a miss.
  std::shared_ptr<Entry> lookup(const std::vector<IValue>& inputs, bool grad_mode) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
      if (matches((*it)->sig, inputs, grad_mode)) {
        ++stats_.hits;
        return *it;
      }
    return nullptr;
  }

  // With exact_dims, symbolic dims are not applied: a differentiable entry is recorded at one shape.
  Signature signature_of(const std::vector<IValue>& inputs, bool exact_dims = false) {
    bool grad_mode = GradMode::enabled();
    std::lock_guard<std::mutex> lock(mu_);
    return jit::signature_of(inputs, grad_mode, exact_dims ? nullptr : &symbolic_);
  }

  // Logs and counts a miss against the last entry compiled; returns the (input, dim) that changed.
  std::pair<int, int> note_miss(const Signature& before, const Signature& now, const char* what) {
    std::pair<int, int> dim;
    std::string why = miss_reason(before, now, &dim);
    kiln::logger().info("recompiling {}{}: {}", name_, what, why);
    stats_.last_miss_reason = why;
    return dim;
  }

  std::shared_ptr<Entry> entry_for(Signature sig) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries_)
      if (e->sig == sig) {
        ++stats_.hits;
        return e;
      }
    if (!entries_.empty()) {
      std::pair<int, int> dim = note_miss(entries_.back()->sig, sig, "");
      if (dim.first >= 0 && ++dim_misses_[dim] >= opts_.recompile_limit) {
        // Another thread may have made the dim symbolic after this call's signature was taken: counted once.
        if (symbolic_.insert(dim).second) {
          ++stats_.symbolic_dims;
          kiln::logger().info("{}: input {} dim {} changed {} times; compiling it as a symbolic dim", name_, dim.first,
                              dim.second, dim_misses_[dim]);
        }
        sig.inputs[size_t(dim.first)].dims[size_t(dim.second)] = kSymbolicDim;
        for (const auto& e : entries_)
          if (e->sig == sig) return e;
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    auto e = std::make_shared<Entry>();
    e->sig = sig;
    Choice c = choose(sig);
    e->code = compile_graph(specialise(*source_, sig), name_, c.pipeline, c.device, c.compile, group_stats_);
    stats_.backend = c.name;
    note_compiled(t0);
    entries_.push_back(e);
    return e;
  }

  void note_compiled(std::chrono::steady_clock::time_point t0) {
    ++stats_.misses;
    stats_.compile_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    stats_.kernels = group_stats_.kernels;
    stats_.gemm_kernels = group_stats_.gemm_kernels;
    stats_.interpreted_groups = group_stats_.interpreted_groups;
    stats_.kernel_compile_ms = group_stats_.kernel_compile_ms;
  }

  // Rewrites that change which values the backward formulas read, made before the recording; how many.
  int64_t rewrite_for_autodiff(ir::Graph& g) const {
    const auto& off = opts_.pipeline.disable;
    const bool attention = std::find(off.begin(), off.end(), "fuse_attention") == off.end();
    return pool_before_relu(g).changes + (attention ? fuse_attention(g).changes : 0);
  }

  // The graph whose run is recorded with its backward (caller holds mu_).
  const ir::Graph& autodiff_source() {
    if (!autodiff_source_) {
      std::shared_ptr<ir::Graph> g = source_->copy();
      if (rewrite_for_autodiff(*g) > 0) {
        ir::verify(*g);
        autodiff_source_ = std::move(g);
      } else {
        autodiff_source_ = source_;
      }
    }
    return *autodiff_source_;
  }

  // The differentiable entry of a call to a source that cannot be differentiated as a whole, one per
  // signature of the flat inputs: the source with its tuples taken apart (jit/flat_tuples.h), specialised
  // to the signature and folded, so the checks the signature decides (an LSTM's input rank and size, its
  // state's shape) are gone. Null where what is left still cannot be (a branch on a value): the call takes
  // the interpreter, which raises as the source does.
  std::shared_ptr<TrainEntry> specialised_entry(const std::vector<IValue>& flat) {
    bool grad_mode = GradMode::enabled();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = specialised_.rbegin(); it != specialised_.rend(); ++it)
        if (matches(it->first, flat, grad_mode)) {
          if (it->second) ++stats_.hits;
          return it->second;
        }
    }
    Signature sig = signature_of(flat, /*exact_dims=*/true);
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [s, e] : specialised_)
      if (s == sig) return e;
    if (!flat_source_done_) {
      flat_ = flatten_tuples(*source_);
      flat_source_done_ = true;
    }
    std::shared_ptr<TrainEntry> entry;
    if (flat_.graph) {
      auto t0 = std::chrono::steady_clock::now();
      std::shared_ptr<ir::Graph> g = specialise(*flat_.graph, sig);
      fold_shapes(*g);
      eliminate_dead_code(*g);
      rewrite_for_autodiff(*g);
      ir::verify(*g);
      std::string why;
      if (can_differentiate(*g, &why)) {
        if (!specialised_.empty()) note_miss(specialised_.back().first, sig, " (forward+backward)");
        std::vector<bool> rg;
        for (const InputSig& in : sig.inputs) rg.push_back(in.requires_grad);
        JointGraph joint = build_joint_graph(*g, flat, rg, flatten_flags(hidden_, flat_.output_types));
        entry = add_train_entry_locked(sig, joint, t0);
      } else {
        why_not_trainable_ = why;
      }
    }
    specialised_.emplace_back(std::move(sig), entry);
    return entry;
  }

  std::shared_ptr<TrainEntry> train_entry_for(const std::vector<IValue>& inputs) {
    bool grad_mode = GradMode::enabled();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = train_entries_.rbegin(); it != train_entries_.rend(); ++it)
        if (matches((*it)->sig, inputs, grad_mode)) {
          ++stats_.hits;
          return *it;
        }
    }
    Signature sig = signature_of(inputs, /*exact_dims=*/true);
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : train_entries_)
      if (e->sig == sig) return e;
    if (!train_entries_.empty()) note_miss(train_entries_.back()->sig, sig, " (forward+backward)");
    auto t0 = std::chrono::steady_clock::now();
    std::vector<bool> rg;
    for (const InputSig& in : sig.inputs) rg.push_back(in.requires_grad);
    JointGraph joint = build_joint_graph(autodiff_source(), inputs, rg, hidden_);
    return add_train_entry_locked(std::move(sig), joint, t0);
  }

 public:
  void add_train_entry(const std::vector<IValue>& inputs, const JointGraph& joint) {
    if (!trainable_) return;
    auto t0 = std::chrono::steady_clock::now();
    Signature sig = signature_of(inputs, /*exact_dims=*/true);
    std::lock_guard<std::mutex> lock(mu_);
    // A rewrite before autodiff changes which values the formulas read: this function records its own.
    if (&autodiff_source() != source_.get()) return;
    for (const auto& e : train_entries_)
      if (e->sig == sig) return;
    add_train_entry_locked(std::move(sig), joint, t0);
  }

 private:
  std::shared_ptr<TrainEntry> add_train_entry_locked(Signature sig, const JointGraph& joint,
                                                     std::chrono::steady_clock::time_point t0) {
    bool on_demand = std::any_of(sig.inputs.begin(), sig.inputs.end(), [](const InputSig& in) { return in.on_demand; });
    Partition part = partition_min_cut(joint, on_demand);
    auto e = std::make_shared<TrainEntry>();
    e->sig = sig;
    Choice c = choose(sig);
    auto forward = compile_graph(part.forward, name_ + "_fwd", c.pipeline, c.device, c.compile, group_stats_);
    forward->caller_results = joint.num_forward_outputs;
    e->forward = forward;
    e->backward = compile_graph(part.backward, name_ + "_bwd", c.pipeline, c.device, c.compile, group_stats_);
    stats_.backend = c.name;
    e->tangent_of = joint.tangent_of;
    e->grad_of = joint.grad_of;
    e->num_outputs = joint.num_forward_outputs;
    e->saved_is_primal = part.saved_is_primal;
    note_compiled(t0);
    ++stats_.train_compiles;
    stats_.saved_bytes = part.saved_bytes;
    stats_.eager_saved_bytes = part.eager_saved_bytes;
    stats_.recomputed_nodes = part.recomputed_nodes;
    kiln::logger().debug("{}: compiled forward+backward; saves {} bytes between them (eager would save {}), recomputes "
                  "{} ops", name_, part.saved_bytes, part.eager_saved_bytes, part.recomputed_nodes);
    train_entries_.push_back(e);
    return e;
  }

  // Forward on the compiled forward graph with autograd off; the outputs get a node whose backward is
  // the compiled backward graph.
  std::vector<IValue> run_training(const std::vector<IValue>& inputs, const std::shared_ptr<TrainEntry>& e) {
    std::vector<IValue> all;
    {
      NoGradGuard off;
      all = e->forward->run(inputs);
    }
    std::vector<IValue> outs(std::make_move_iterator(all.begin()),
                             std::make_move_iterator(all.begin() + long(e->num_outputs)));
    if (e->tangent_of.empty()) return outs;
    auto node = std::make_shared<CompiledBackward>();
    node->fn_name = name_;
    node->backward = e->backward;
    for (size_t p : e->grad_of) node->next.push_back(gradient_edge(inputs[p].to_tensor()));
    for (size_t s = 0; s < e->saved_is_primal.size(); ++s) {
      const Tensor& t = all[e->num_outputs + s].to_tensor();
      // a value saved that is also an output gets the node as its grad_fn: held strongly it would be a cycle
      bool is_output = false;
      for (const IValue& o : outs) is_output |= o.is_tensor() && o.to_tensor().is_same(t);
      node->saved.push_back(is_output ? SavedTensor::of_output(t) : SavedTensor(t, /*values=*/true));
    }
    attach_grad_fn(node, outs, e->tangent_of, inputs);
    return outs;
  }

  std::shared_ptr<const ir::Graph> source_;
  std::string name_;
  CompileOptions opts_;
  std::vector<bool> hidden_;  // outputs that are write-backs, not results: no gradient flows from them
  bool trainable_ = false;
  std::string why_not_trainable_;
  std::shared_ptr<const ir::Graph> autodiff_source_;
  FlatTuples flat_;  // the source with its tuples taken apart, made at the first call that needs it
  bool flat_source_done_ = false;
  std::vector<std::pair<Signature, std::shared_ptr<TrainEntry>>> specialised_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Entry>> entries_;
  std::vector<std::shared_ptr<TrainEntry>> train_entries_;
  std::map<std::pair<int, int>, int> dim_misses_;
  SymbolicDims symbolic_;
  CacheStats stats_;
  GroupCompileStats group_stats_;
  bool said_eager_ = false;
};

}  // namespace kiln::jit

namespace kiln {

namespace {
jit::CompiledFunction& compiled(const Function& fn) {
  auto* c = dynamic_cast<jit::CompiledFunction*>(fn.executor().get());
  if (!c) fail("{}: not a compiled function (use kiln::compile)", fn.name());
  return *c;
}
}  // namespace

Function compile(const Function& fn, jit::CompileOptions options) {
  if (!fn.defined()) fail("compile: undefined function");
  auto graph = std::shared_ptr<const ir::Graph>(fn.graph().copy());
  std::vector<bool> hidden(graph->outputs().size(), false);
  for (auto [in, out] : fn.binding().writebacks) hidden[out] = true;
  for (const Function::Binding::Guard& g : fn.binding().guards) hidden[g.output] = true;
  auto exec = std::make_shared<jit::CompiledFunction>(graph, fn.name(), std::move(options), std::move(hidden));
  return fn.with_executor(exec);
}

jit::CacheStats compile_stats(const Function& fn) { return compiled(fn).stats(); }

void jit::add_train_entry(const Function& fn, const std::vector<IValue>& inputs, const JointGraph& joint) {
  compiled(fn).add_train_entry(inputs, joint);
}

std::shared_ptr<const ir::Graph> compiled_graph(const Function& fn, const std::vector<IValue>& inputs) {
  std::vector<IValue> all = inputs;
  for (const Tensor& t : fn.binding().bound) all.emplace_back(t);
  return compiled(fn).graph_for(all);
}

std::shared_ptr<const ir::Graph> compiled_backward_graph(const Function& fn, const std::vector<IValue>& inputs) {
  std::vector<IValue> all = inputs;
  for (const Tensor& t : fn.binding().bound) all.emplace_back(t);
  return compiled(fn).backward_graph_for(all);
}

}  // namespace kiln
