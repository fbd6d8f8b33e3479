#include "backends/interp/function.h"

#include "core/log.h"

#include <mutex>
#include <ostream>

#include "backends/interp/interpreter.h"
#include "eager/autocast/autocast.h"
#include "eager/autograd/graph.h"

namespace kiln {

Function::Function(std::shared_ptr<ir::Graph> graph, std::string name)
    : graph_(std::move(graph)), name_(std::move(name)) {}

Function::Function(std::shared_ptr<ir::Graph> graph, std::string name, Binding binding)
    : graph_(std::move(graph)), name_(std::move(name)), binding_(std::move(binding)) {}

const ir::Graph& Function::graph() const {
  if (!graph_) fail("function: undefined function has no graph");
  return *graph_;
}

std::vector<ir::Type> Function::input_types() const {
  const auto& ins = graph().inputs();
  std::vector<ir::Type> ts;
  for (size_t i = 0; i + binding_.bound.size() < ins.size(); ++i) ts.push_back(ins[i]->type());
  return ts;
}

namespace {
std::string signature_str(const std::vector<IValue>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) {
    const IValue& x = xs[i];
    s += i ? ", " : "";
    s += x.is_tensor() && x.to_tensor().defined() ? ir::type_of(x.to_tensor().dtype(), x.to_tensor().sizes()).str()
                                                 : x.type_name();
  }
  return "(" + s + ")";
}
std::string signature_str(const std::vector<ir::Type>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return "(" + s + ")";
}

// Whether a runtime value can be passed where the graph expects type t.
bool fits(const IValue& x, const ir::Type& t, bool exact_shapes) {
  switch (t.kind) {
    case ir::TypeKind::Tensor: {
      if (!x.is_tensor() || !x.to_tensor().defined()) return false;
      const Tensor& v = x.to_tensor();
      if (t.dtype && *t.dtype != v.dtype()) return false;
      if (!t.dims) return true;
      if (t.dims->size() != size_t(v.dim())) return false;
      for (size_t d = 0; d < t.dims->size(); ++d) {
        const ir::Dim& dim = (*t.dims)[d];
        if (exact_shapes && dim.is_known() && dim.size != v.sizes()[d]) return false;
      }
      return true;
    }
    case ir::TypeKind::Int: return x.is_int() || x.is_bool();
    case ir::TypeKind::Float: return x.is_number();
    case ir::TypeKind::Bool: return x.is_bool();
    case ir::TypeKind::Str: return x.is_string();
    case ir::TypeKind::None: return x.is_none();
    case ir::TypeKind::Optional: return x.is_none() || fits(x, t.elems.at(0), exact_shapes);
    case ir::TypeKind::Tuple: {
      if (!x.is_tuple() || x.elements().size() != t.elems.size()) return false;
      for (size_t i = 0; i < t.elems.size(); ++i)
        if (!fits(x.elements()[i], t.elems[i], exact_shapes)) return false;
      return true;
    }
    case ir::TypeKind::List:
      if (!x.is_list()) return false;
      for (const IValue& e : x.elements())
        if (!fits(e, t.elems.at(0), exact_shapes)) return false;
      return true;
  }
  return false;
}
}  // namespace

namespace {
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  Tensor x = a.to(DType::Float64).contiguous(), y = b.to(DType::Float64).contiguous();
  const double *p = x.data_ptr<double>(), *q = y.data_ptr<double>();
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!(p[i] == q[i] || (p[i] != p[i] && q[i] != q[i]))) return false;
  return true;
}
std::string value_summary(const Tensor& t) {
  if (t.numel() == 1) return fmt::format("{}", t.to(DType::Float64).contiguous().data_ptr<double>()[0]);
  return fmt::format("a tensor of shape {}", shape_str(t.sizes()));
}
}  // namespace

void Function::check_signature(const std::vector<IValue>& inputs) const {
  std::vector<ir::Type> want = input_types();
  if (inputs.size() != want.size())
    fail("{}: expected {} inputs {}, got {} {}", name_, want.size(), signature_str(want), inputs.size(),
         signature_str(inputs));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (fits(inputs[i], want[i], binding_.exact_shapes)) continue;
    bool shape_only = fits(inputs[i], want[i], false);
    fail("{}: input {} ({}) has signature {}, the function takes {}{}", name_, i, graph().inputs()[i]->name(),
         signature_str(inputs), signature_str(want),
         shape_only ? "; " + binding_.exact_shapes_reason : std::string());
  }
}

std::vector<IValue> Function::call(const std::vector<IValue>& inputs) const {
  check_signature(inputs);
  // A graph runs as recorded: casts autocast made while tracing are nodes of it, and an enclosing
  // scope must not cast again in the interpreter (compiled kernels could not follow it either).
  if (autocast_enabled()) {
    static std::once_flag once;
    std::call_once(once, [&] {
      kiln::logger().info("{}: a traced, scripted or compiled function runs its graph as recorded; the enclosing "
                   "autocast scope adds no casts to it (trace or script it under autocast to record them)", name_);
    });
  }
  AutocastGuard graph_as_recorded(false);
  std::vector<IValue> all = inputs;
  for (const Tensor& t : binding_.bound) all.emplace_back(t);
  std::vector<IValue> out = executor_ ? executor_->run(all) : interp::run(graph(), all);
  if (binding_.writebacks.empty() && binding_.guards.empty()) return out;
  NoGradGuard no_grad;
  std::vector<bool> hidden(out.size(), false);
  for (const Binding::Guard& g : binding_.guards) {
    const Tensor& now = out[g.output].to_tensor();
    if (!same_values(now, g.expected))
      throw GuardFailure(fmt::format("{}: guard failed: {} was {} when traced and is {} now; the traced C++ code may "
                                     "take another path for these inputs, so the graph is not used",
                                     name_, g.what, value_summary(g.expected), value_summary(now)));
    hidden[g.output] = true;
  }
  for (auto [in, o] : binding_.writebacks) {
    Tensor target = all[in].to_tensor();
    target.copy_(out[o].to_tensor());
    hidden[o] = true;
  }
  std::vector<IValue> visible;
  for (size_t i = 0; i < out.size(); ++i)
    if (!hidden[i]) visible.push_back(std::move(out[i]));
  return visible;
}

namespace {
void flatten(const IValue& v, std::vector<Tensor>& out, const std::string& fn) {
  if (v.is_tensor()) out.push_back(v.to_tensor());
  else if (v.is_tuple() || v.is_list())
    for (const IValue& e : v.elements()) flatten(e, out, fn);
  else fail("{}: returns a {}, which the tensor call form cannot return; use call()", fn, v.type_name());
}
}  // namespace

std::vector<Tensor> Function::operator()(const std::vector<Tensor>& inputs) const {
  std::vector<IValue> ins(inputs.begin(), inputs.end());
  std::vector<Tensor> out;
  for (const IValue& v : call(ins)) flatten(v, out, name_);
  return out;
}

Function Function::with_executor(std::shared_ptr<Executor> e) const {
  Function f = *this;
  f.executor_ = std::move(e);
  return f;
}

std::ostream& operator<<(std::ostream& os, const Function& f) { return os << f.graph(); }

}  // namespace kiln
