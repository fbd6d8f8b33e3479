#pragma once
// The recorder behind trace(): a TraceHooks implementation that turns the dispatcher's reports into
// graph nodes, keyed by TensorImpl. The JIT records the eager autograd engine with it (one source of
// derivative formulas for eager and compiled backward).
#include "core/log.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/interp/function.h"
#include "core/ir/dtype_rules.h"
#include "core/ir/verifier.h"
#include "core/matmul_shape.h"
#include "core/trace_hooks.h"
#include "eager/shapes_only.h"
#include "eager/untraced.h"
#include "eager/autograd/graph.h"
#include "eager/cpu/attention_shapes.h"
#include "tracer/undefined_tensor.h"

namespace kiln::tracing {

using ir::Value;

// Hooks off for the tracer's own tensor work, so it records nothing and reads nothing.
using HooksOff = Untraced;

// A shapes-only recording met something that needs the values it did not compute: a read into C++ of a
// tensor's value, or a computed tensor captured as a constant. The caller records again with values.
class ValuesNeeded : public std::exception {
 public:
  explicit ValuesNeeded(std::string why) : why_(std::move(why)) {}
  const char* what() const noexcept override { return why_.c_str(); }

 private:
  std::string why_;
};

class Recorder final : public TraceHooks, public ShapesOnlyHooks {
 public:
  explicit Recorder(std::string fn_name, bool silent = false) : graph_(std::make_shared<ir::Graph>()), fn_name_(std::move(fn_name)), silent_(silent) {}

  Value* add_input(const Tensor& t, std::string name) {
    if (!t.defined()) fail("trace: {} is an undefined tensor", name);
    if (find(t.impl())) fail("trace: {} is the same tensor as an earlier input", name);
    Value* v = graph_->add_input(ir::type_of(t.dtype(), t.impl()->sizes), std::move(name));
    remember(t, v);
    inputs_.emplace_back(t, v);
    return v;
  }

  // The value a tensor stands for: recorded, or captured now as a constant.
  Value* value_of(const Tensor& t) {
    if (Value* v = find(t.impl())) return v;
    const Storage* st = t.impl()->storage.get();
    if (mutated_storages_.count(st))
      fail("trace: a tensor whose storage was written in place through another view is read here; a trace cannot "
           "follow writes through views, write out of place instead");
    if (undefined(st)) throw ValuesNeeded("a tensor computed while recording shapes only is captured as a constant");
    for (const auto& [impl, r] : values_) {
      std::shared_ptr<TensorImpl> live = r.impl.lock();
      if (live && live->storage.get() == st && st != nullptr)
        fail("trace: a tensor that aliases {} was made outside the dispatcher (from raw storage or from_blob); a "
             "trace cannot follow it",
             describe(r.value));
    }
    HooksOff off;
    if (t.requires_grad())
      warn("a tensor that requires grad is captured as a constant (gradients will not flow to it); pass it as an "
           "input or trace the module with trace_module");
    Tensor snapshot = t.clone().detach();  // later writes to t must not change the graph
    bool wrapped = t.impl()->wrapped_number;
    snapshot.impl()->wrapped_number = wrapped;
    Value* v = graph_->insert_constant(snapshot, wrapped);
    remember(t, v);
    return v;
  }

  // With a shape rule set (jit's shape propagation), an op whose output is a fresh CPU tensor is recorded
  // from its inputs' types alone and its kernel skipped: the output's contents are undefined. For a
  // recording whose values nobody reads (CompiledTrainStep's first call, whose compiled run computes the
  // step). Views and the rows without a rule here run their kernels, on whatever their inputs hold.
  // Installed for this thread until the recorder goes.
  using ShapeRule = std::optional<std::vector<ir::Dim>> (*)(const ir::Node&);
  void set_shapes_only(ShapeRule rule) {
    if (!shape_rule_) previous_shapes_only_ = set_shapes_only_hooks(this);
    shape_rule_ = rule;
  }
  ~Recorder() override {
    if (shape_rule_) set_shapes_only_hooks(previous_shapes_only_);
  }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  bool record_only(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs, std::vector<Tensor>& outputs) override {
    if (!shape_rule_ || trace_hooks() != this) return false;
    // attention's kernels are a recording's costliest, and their outputs come from their own shape checks
    const bool attention = op == OpId::FlashAttention || op == OpId::FlashAttentionBackward;
    if (!attention && !shape_checked(op, inputs, attrs)) return false;
    for (const Tensor& t : inputs)
      if (!t.device().is_cpu()) return false;
    QuietTraceReads quiet;
    // the kernel's checks raise before the graph gains the inputs' values, as the other ops' shape checks do
    std::vector<std::pair<Shape, DType>> metas;
    if (attention) metas = cpu::flash_attention_outputs(op, inputs);
    std::vector<Value*> ins;
    for (const Tensor& t : inputs) ins.push_back(value_of(t));
    if (attention) {
      ir::Node* n = graph_->insert(graph_->create_op(op, ins, attrs, metas.size()));
      outputs.clear();
      for (size_t i = 0; i < metas.size(); ++i) {
        n->output(i)->set_type(ir::type_of(metas[i].second, metas[i].first));
        outputs.push_back(undefined_tensor(metas[i].first, metas[i].second));
        undefined_[outputs.back().impl()->storage.get()] = outputs.back().storage();
      }
      pending_ = n;
      return true;
    }
    ir::Node* n = graph_->create_op(op, ins, attrs, 1);
    std::optional<std::vector<ir::Dim>> dims = shape_rule_(*n);
    std::optional<DType> dtype = ir::op_result_dtype(*n, /*others_keep_first=*/true);
    Shape shape;
    for (const ir::Dim& d : dims ? *dims : std::vector<ir::Dim>{}) shape.push_back(d.is_known() ? d.size : -1);
    if (!dims || !dtype || std::count(shape.begin(), shape.end(), -1)) {
      n->destroy();  // the kernel runs and raises what it finds wrong
      return false;
    }
    graph_->insert(n);
    n->output()->set_type(ir::type_of(*dtype, shape));
    outputs = {undefined_tensor(shape, *dtype)};
    undefined_[outputs[0].impl()->storage.get()] = outputs[0].storage();
    pending_ = n;
    return true;
  }

  void on_op(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs, std::vector<Tensor>& outputs) override {
    if (ir::Node* n = std::exchange(pending_, nullptr)) {  // recorded by record_only
      for (size_t i = 0; i < outputs.size(); ++i) remember(outputs[i], n->output(i));
      return;
    }
    QuietTraceReads quiet;
    std::vector<Value*> ins;
    bool from_undefined = false;  // a kernel that ran on undefined contents gave undefined ones
    for (const Tensor& t : inputs) {
      ins.push_back(value_of(t));
      from_undefined = from_undefined || (shape_rule_ && undefined(t.impl()->storage.get()));
    }
    for (const Tensor& t : outputs)
      if (from_undefined && t.defined()) undefined_[t.impl()->storage.get()] = t.storage();
    ir::Node* n = graph_->insert(graph_->create_op(op, ins, attrs, outputs.size()));
    for (size_t i = 0; i < outputs.size(); ++i) {
      n->output(i)->set_type(ir::type_of(outputs[i].dtype(), outputs[i].impl()->sizes));
      remember(outputs[i], n->output(i));
    }
  }

  void on_random(const char* factory, const Tensor* like, const Tensor& result) override {
    if (!like) {
      warn(fmt::format("{} draws its numbers once, while tracing: they are a constant of the trace, the same at every "
                       "call (rand_like draws again at each call)",
                       factory));
      return;
    }
    ir::Node* n = graph_->insert(graph_->create(ir::Prim::RandLike, 1));
    n->add_input(value_of(*like));
    n->output()->set_type(ir::type_of(result.dtype(), result.impl()->sizes));
    remember(result, n->output());
  }

  void on_inplace(const char* method, const Tensor& self, const Tensor& result) override {
    QuietTraceReads quiet;
    Value* v = value_of(result);
    const Storage* st = self.impl()->storage.get();
    for (const auto& [impl, r] : values_) {
      if (impl == self.impl() || impl == result.impl()) continue;
      std::shared_ptr<TensorImpl> live = r.impl.lock();
      if (live && live->storage.get() == st)
        fail("trace: {}_ writes into a tensor that shares its storage with another traced tensor (a view); a trace "
             "cannot follow writes through views, write out of place instead",
             method);
    }
    if (undefined(result.impl()->storage.get())) undefined_[st] = self.storage();
    mutated_storages_.insert(st);
    mutated_keep_.push_back(self.storage());
    remember(self, v);
  }

  void on_read(const TensorImpl* impl, TraceRead what) override {
    if (what != TraceRead::Size && undefined(impl->storage.get()))
      throw ValuesNeeded(what == TraceRead::Item ? "item() read a value the recording did not compute"
                                                 : "a data pointer of a tensor the recording did not compute was read");
    Value* v = find(impl);
    if (!v) return;
    if (what == TraceRead::Size) {
      if (exact_shapes_) return;
      exact_shapes_ = true;
      reason_ = fmt::format("the trace read the sizes of {} as numbers, so it is specialised to the sample shapes; "
                            "trace again for other shapes",
                            describe(v));
      warn(fmt::format("sizes of {} were read as numbers; the trace is specialised to the sample input shapes",
                       describe(v)));
      return;
    }
    if (!read_values_.insert(v).second) return;
    if (guard_reads_) add_guard(impl, v, what);
    warn(fmt::format("{} read the value of {} into C++; the trace may not generalise to other inputs (branches and "
                     "numbers computed from it are baked in)",
                     what == TraceRead::Item ? "item()" : "a data pointer", describe(v)));
  }

  void on_alias(const Tensor& base, const Tensor& alias) override {
    Value* base_value = find(base.impl());
    if (!base_value) return;
    // A detach on a gradient path (softmax's max) is kept as prim::detach: a backward derived from
    // the trace (CompiledTrainStep's joint graph) must leave that path out as eager's autograd did.
    // The joint graph's own recording has its gradients already and keeps the plain alias.
    if (keep_detach_ && GradMode::enabled() && base.requires_grad()) {
      ir::Node* n = graph_->insert(graph_->create(ir::Prim::Detach, 1));
      n->add_input(base_value);
      n->output()->set_type(base_value->type());
      remember(alias, n->output());
      return;
    }
    remember(alias, base_value);
  }

  const std::shared_ptr<ir::Graph>& graph() const { return graph_; }
  // Turns each value read into C++ into a guard of the traced function (Function::Binding::guards).
  void set_guard_value_reads(bool on) { guard_reads_ = on; }
  // Whether a detach on a gradient path is recorded as prim::detach (else as the value it detaches).
  void set_keep_detach(bool on) { keep_detach_ = on; }

  Function finish(const std::vector<Tensor>& outputs, std::vector<Tensor> bound) {
    QuietTraceReads quiet;
    for (const Tensor& t : outputs) {
      if (!t.defined()) fail("trace: {} returned an undefined tensor", fn_name_);
      graph_->register_output(value_of(t));
    }
    Function::Binding b;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      Value* now = find(inputs_[i].first.impl());
      if (now != inputs_[i].second) b.writebacks.emplace_back(i, graph_->register_output(now));
    }
    b.bound = std::move(bound);
    b.exact_shapes = exact_shapes_;
    b.exact_shapes_reason = reason_;
    b.warnings = std::move(warnings_);
    for (auto& [v, expected, what] : guards_) b.guards.push_back({graph_->register_output(v), expected, what});
    ir::verify(*graph_);
    return Function(graph_, fn_name_, std::move(b));
  }

 private:
  void add_guard(const TensorImpl* impl, Value* v, TraceRead what) {
    std::shared_ptr<TensorImpl> live = values_.at(impl).impl.lock();  // being read, so alive
    HooksOff off;
    QuietTraceReads quiet;
    guards_.push_back({v, Tensor(live).clone().detach(),
                       fmt::format("{} of {}", what == TraceRead::Item ? "item()" : "a data pointer", describe(v))});
  }

  // Tensors made with grad mode on are held: autograd hands a saved output back as an alias made outside
  // the dispatcher once the output itself is gone, and the recording must still know it. Those made
  // with grad mode off (the backward's gradients) are held weakly: keeping every one alive would touch
  // fresh memory for each op (the joint graph of a GPT step grew by 180 MB, its page faults most of
  // the recording's time). A dead entry is not found, also when another tensor has taken its address.
  struct Recorded {
    Value* value;
    std::weak_ptr<TensorImpl> impl;
  };
  Value* find(const TensorImpl* impl) const {
    auto it = values_.find(impl);
    if (it == values_.end() || it->second.impl.expired()) return nullptr;
    return it->second.value;
  }

  void remember(const Tensor& t, Value* v) {
    values_[t.impl()] = Recorded{v, t.impl_ptr()};
    if (GradMode::enabled()) keep_.push_back(t);
  }

  // Whether record_only may give op's output from the shape rule: the rows whose output is a fresh tensor
  // (not a view, not the input itself), once the checks their kernels make of the shapes have passed.
  static bool shape_checked(OpId op, const std::vector<Tensor>& in, const Attrs& attrs) {
    switch (op_info(op).kind) {
      case OpKind::Unary: case OpKind::Reduce: return true;
      case OpKind::Binary: broadcast_shapes(op_name(op), in.at(0).sizes(), in.at(1).sizes()); return true;
      case OpKind::View: return false;
      case OpKind::Other: break;
    }
    if (op == OpId::Where) {
      broadcast_shapes(op_name(op), broadcast_shapes(op_name(op), in.at(0).sizes(), in.at(1).sizes()), in.at(2).sizes());
      return true;
    }
    if (op == OpId::Matmul) {
      if (in.at(0).dtype() != in.at(1).dtype() || in[0].dtype() == DType::Bool) return false;
      matmul_shape(in[0].sizes(), in[1].sizes());
      return true;
    }
    if (op == OpId::Cast) return attrs.has("dtype") && attrs.dtype("dtype") != in.at(0).dtype();
    return op == OpId::Clone || op == OpId::IndexSelect || op == OpId::Gather || op == OpId::IndexAdd ||
           op == OpId::ScatterAdd || op == OpId::SliceBackward;
  }

  bool undefined(const Storage* st) const {
    auto it = undefined_.find(st);
    return it != undefined_.end() && !it->second.expired();
  }

  std::string describe(const Value* v) const {
    if (v->node()->prim() == ir::Prim::Param) return fmt::format("input {} ({})", v->offset(), v->name());
    return fmt::format("the output of {}", v->node()->kind_name());
  }

  void warn(const std::string& msg) {
    if (!silent_) kiln::logger().warn("trace {}: {}", fn_name_, msg);
    warnings_.push_back(msg);
  }

  std::shared_ptr<ir::Graph> graph_;
  std::string fn_name_;
  std::unordered_map<const TensorImpl*, Recorded> values_;
  std::vector<Tensor> keep_;
  std::vector<std::shared_ptr<Storage>> mutated_keep_;  // so no other storage takes a mutated one's address
  std::vector<std::pair<Tensor, Value*>> inputs_;
  std::unordered_set<const Storage*> mutated_storages_;
  std::unordered_set<const Value*> read_values_;
  bool exact_shapes_ = false;
  std::string reason_;
  std::vector<std::string> warnings_;
  bool silent_ = false;
  bool keep_detach_ = true;
  bool guard_reads_ = false;
  struct PendingGuard {
    Value* v;
    Tensor expected;
    std::string what;
  };
  std::vector<PendingGuard> guards_;
  ShapeRule shape_rule_ = nullptr;
  ShapesOnlyHooks* previous_shapes_only_ = nullptr;
  ir::Node* pending_ = nullptr;  // recorded by record_only, its outputs given to on_op
  // Storages whose contents a shapes-only recording left undefined (held weakly: a dead one is no longer
  // anything's contents).
  std::unordered_map<const Storage*, std::weak_ptr<Storage>> undefined_;
};

// Installs a tracer for this thread for one scope.
class TraceScope {
 public:
  explicit TraceScope(Recorder& t) : saved_(set_trace_hooks(&t)) {}
  ~TraceScope() { set_trace_hooks(saved_); }

 private:
  TraceHooks* saved_;
};

}  // namespace kiln::tracing
