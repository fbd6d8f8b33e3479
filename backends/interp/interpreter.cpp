#include "backends/interp/interpreter.h"

#include <cmath>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "backends/interp/number_ops.h"
#include "core/ir/printer.h"
#include "eager/dispatch.h"

namespace kiln::interp {

namespace {

using ir::Block;
using ir::Node;
using ir::Prim;
using ir::Value;

class Frame {
 public:
  Frame(const ir::Graph& g, NodeRunner* runner, bool free_dead) : g_(g), runner_(runner) {
    if (free_dead) plan_last_uses();
  }

  void bind(const Value* v, IValue x) { env_[v] = std::move(x); }
  const IValue& get(const Value* v) const {
    auto it = env_.find(v);
    if (it == env_.end()) fail("interp: a value is read before it was computed (run the verifier on this graph)");
    return it->second;
  }

  // Runs b's nodes and returns its results.
  std::vector<IValue> block(const Block& b) {
    for (Node* n : b.nodes()) {
      try {
        if (!(runner_ && delegate(*n))) node(*n);
        release_after(n);
      } catch (const Error& e) {
        if (std::string_view(e.what()).rfind("interp: ", 0) == 0) throw;
        fail("interp: line {} ({}): {}", line_of(*n), n->kind_name(), e.what());
      }
    }
    std::vector<IValue> out;
    for (Value* v : b.outputs()) out.push_back(get(v));
    return out;
  }

 private:
  int line_of(const Node& n) {
    if (n.line) return n.line;
    if (!printed_) printed_ = std::make_unique<ir::PrintedGraph>(ir::print_graph(g_));
    auto it = printed_->lines.find(&n);
    return it == printed_->lines.end() ? 0 : it->second;
  }

  IValue in(const Node& n, size_t i) const { return get(n.input(i)); }

  bool delegate(const Node& n) {
    std::vector<IValue> ins, outs;
    for (Value* v : n.inputs()) ins.push_back(get(v));
    if (!runner_->run(n, ins, outs)) return false;
    if (outs.size() != n.outputs().size())
      fail("{} produced {} outputs, the node has {}", n.kind_name(), outs.size(), n.outputs().size());
    for (size_t i = 0; i < outs.size(); ++i) bind(n.output(i), std::move(outs[i]));
    return true;
  }

  // The last top-level node reading each top-level value (graph outputs are never released).
  void plan_last_uses() {
    std::unordered_map<const Node*, const Node*> top_of;  // any node → its enclosing top-level node
    std::function<void(const Block&, const Node*)> walk = [&](const Block& b, const Node* top) {
      for (Node* n : b.nodes()) {
        top_of[n] = top ? top : n;
        for (Block* sub : n->blocks()) walk(*sub, top ? top : n);
      }
    };
    walk(*g_.block(), nullptr);
    std::unordered_set<const Value*> outputs(g_.outputs().begin(), g_.outputs().end());
    auto consider = [&](const Value* v) {
      if (outputs.count(v)) return;
      const Node* last = nullptr;
      for (const ir::Use& u : v->uses()) {
        auto it = top_of.find(u.user);
        if (it == top_of.end()) return;  // read by a Return: keep
        if (!last || last->is_before(it->second)) last = it->second;
      }
      if (last) dead_after_[last].push_back(v);
    };
    for (const Value* v : g_.inputs()) consider(v);
    for (Node* n : g_.block()->nodes())
      for (const Value* v : n->outputs()) consider(v);
  }

  void release_after(const Node* n) {
    auto it = dead_after_.find(n);
    if (it == dead_after_.end()) return;
    for (const Value* v : it->second) env_.erase(v);
  }

  void node(const Node& n) {
    if (n.is_op()) return op(n);
    switch (n.prim()) {
      case Prim::Param:
      case Prim::Return:
      case Prim::Op: fail("interp: {} cannot appear in a block's node list", n.kind_name());
      case Prim::Constant: return bind(n.output(), constant(n));
      case Prim::If: return run_if(n);
      case Prim::Loop: return run_loop(n);
      case Prim::FusionGroup: {
        const Block& body = *n.blocks()[0];
        for (size_t i = 0; i < n.inputs().size(); ++i) bind(body.inputs()[i], in(n, i));
        std::vector<IValue> r = block(body);
        for (size_t i = 0; i < r.size(); ++i) bind(n.output(i), std::move(r[i]));
        return;
      }
      case Prim::TupleConstruct:
      case Prim::ListConstruct: {
        std::vector<IValue> es;
        for (size_t i = 0; i < n.inputs().size(); ++i) es.push_back(in(n, i));
        return bind(n.output(), n.prim() == Prim::TupleConstruct ? IValue::tuple(std::move(es)) : IValue::list(std::move(es)));
      }
      case Prim::TupleUnpack:
      case Prim::ListUnpack: {
        const auto& es = in(n, 0).elements();
        if (es.size() != n.outputs().size())
          fail("cannot unpack {} values into {}", es.size(), n.outputs().size());
        for (size_t i = 0; i < es.size(); ++i) bind(n.output(i), es[i]);
        return;
      }
      case Prim::TupleIndex: return bind(n.output(), index(in(n, 0), n.attrs().i("index")));
      case Prim::ListIndex: return bind(n.output(), index(in(n, 0), in(n, 1).to_int()));
      case Prim::Len: {
        IValue x = in(n, 0);
        if (x.is_tensor()) {
          if (x.to_tensor().dim() == 0) fail("len() of a 0-d tensor");
          return bind(n.output(), x.to_tensor().size(0));
        }
        return bind(n.output(), int64_t(x.elements().size()));
      }
      case Prim::Size: return bind(n.output(), in(n, 0).to_tensor().size(in(n, 1).to_int()));
      case Prim::Shape: {
        std::vector<IValue> dims;
        for (int64_t d : in(n, 0).to_tensor().sizes()) dims.emplace_back(d);
        return bind(n.output(), IValue::list(std::move(dims)));
      }
      case Prim::ToBool: return bind(n.output(), to_bool(in(n, 0)));
      case Prim::ToInt: {
        IValue x = in(n, 0);
        if (x.is_tensor()) return bind(n.output(), int64_t(scalar_of(x.to_tensor(), "int")));
        if (x.is_double()) return bind(n.output(), int64_t(std::trunc(checked_finite(x.to_double()))));
        return bind(n.output(), x.to_int());
      }
      case Prim::ToFloat: {
        IValue x = in(n, 0);
        return bind(n.output(), x.is_tensor() ? scalar_of(x.to_tensor(), "float") : x.to_double());
      }
      case Prim::NumToTensor: {
        IValue x = in(n, 0);
        Scalar s = x.is_bool() ? Scalar(x.to_bool()) : x.is_int() ? Scalar(x.to_int()) : Scalar(x.to_double());
        return bind(n.output(), Tensor::wrap_scalar(s));
      }
      case Prim::IsNone: return bind(n.output(), in(n, 0).is_none());
      case Prim::Unwrap: {
        IValue x = in(n, 0);
        if (x.is_none()) fail("unwrapped an Optional that is None");
        return bind(n.output(), x);
      }
      case Prim::Raise: fail("{}", n.attrs().has("message") ? n.attrs().s("message") : std::string("assertion failed"));
      case Prim::NumAdd:
      case Prim::NumSub:
      case Prim::NumMul:
      case Prim::NumDiv:
      case Prim::NumFloorDiv:
      case Prim::NumMod:
      case Prim::NumPow:
      case Prim::NumLt:
      case Prim::NumLe:
      case Prim::NumGt:
      case Prim::NumGe:
      case Prim::NumEq:
      case Prim::NumNe:
      case Prim::Min:
      case Prim::Max: return bind(n.output(), number_binary(n.prim(), in(n, 0), in(n, 1)));
      case Prim::NumNeg: {
        IValue x = in(n, 0);
        return bind(n.output(), x.is_double() ? IValue(-x.to_double()) : IValue(-x.to_int()));
      }
      case Prim::Not: return bind(n.output(), !to_bool(in(n, 0)));
    }
  }

  static double checked_finite(double d) {
    if (!std::isfinite(d)) fail("cannot convert float {} to integer", d);
    return d;
  }

  static double scalar_of(const Tensor& t, const char* what) {
    if (t.numel() != 1) fail("{}() of a tensor with {} elements (needs exactly one)", what, t.numel());
    return t.item_double();
  }

  static bool to_bool(const IValue& x) {
    if (x.is_tensor()) {
      const Tensor& t = x.to_tensor();
      if (t.numel() != 1)
        fail("boolean value of a tensor with {} elements is ambiguous (shape {})", t.numel(), shape_str(t.sizes()));
      return t.item_double() != 0;
    }
    if (x.is_double()) return x.to_double() != 0;
    return x.to_int() != 0;
  }

  static IValue index(const IValue& seq, int64_t i) {
    const auto& es = seq.elements();
    int64_t n = int64_t(es.size());
    int64_t j = i < 0 ? i + n : i;
    if (j < 0 || j >= n) fail("index {} is out of range for a {} of {} elements", i, seq.is_tuple() ? "tuple" : "list", n);
    return es[size_t(j)];
  }

  static IValue constant(const Node& n) {
    if (n.tensor().defined()) return n.tensor();
    if (!n.attrs().has("value")) return IValue();
    for (const auto& [k, v] : n.attrs().items())
      if (k == "value")
        return std::visit(
            [](const auto& x) -> IValue {
              using T = std::decay_t<decltype(x)>;
              if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                            std::is_same_v<T, std::string>)
                return IValue(x);
              else fail("prim::Constant: unsupported value kind");
            },
            v);
    return IValue();
  }

  void op(const Node& n) {
    Tensors ins;
    ins.reserve(n.inputs().size());
    for (size_t i = 0; i < n.inputs().size(); ++i) ins.push_back(in(n, i).to_tensor());
    Tensors outs = dispatch(n.op(), ins, n.attrs());
    if (outs.size() != n.outputs().size())
      fail("{} produced {} outputs, the node has {}", n.kind_name(), outs.size(), n.outputs().size());
    for (size_t i = 0; i < outs.size(); ++i) bind(n.output(i), std::move(outs[i]));
  }

  void run_if(const Node& n) {
    std::vector<IValue> r = block(*n.blocks()[to_bool(in(n, 0)) ? 0 : 1]);
    for (size_t i = 0; i < r.size(); ++i) bind(n.output(i), std::move(r[i]));
  }

  void run_loop(const Node& n) {
    int64_t trip = in(n, 0).to_int();
    bool cond = to_bool(in(n, 1));
    std::vector<IValue> carried;
    for (size_t i = 2; i < n.inputs().size(); ++i) carried.push_back(in(n, i));
    const Block& body = *n.blocks()[0];
    for (int64_t it = 0; it < trip && cond; ++it) {
      bind(body.inputs()[0], it);
      for (size_t i = 0; i < carried.size(); ++i) bind(body.inputs()[i + 1], carried[i]);
      std::vector<IValue> r = block(body);
      cond = to_bool(r[0]);
      for (size_t i = 0; i < carried.size(); ++i) carried[i] = std::move(r[i + 1]);
    }
    for (size_t i = 0; i < carried.size(); ++i) bind(n.output(i), std::move(carried[i]));
  }

  const ir::Graph& g_;
  NodeRunner* runner_;
  std::unordered_map<const Node*, std::vector<const Value*>> dead_after_;
  std::unordered_map<const Value*, IValue> env_;
  std::unique_ptr<ir::PrintedGraph> printed_;
};

}  // namespace

std::vector<IValue> run(const ir::Graph& g, const std::vector<IValue>& inputs, NodeRunner* runner,
                        bool free_dead_values) {
  if (inputs.size() != g.inputs().size())
    fail("interp: the graph takes {} inputs, got {}", g.inputs().size(), inputs.size());
  Frame f(g, runner, free_dead_values);
  for (size_t i = 0; i < inputs.size(); ++i) f.bind(g.inputs()[i], inputs[i]);
  return f.block(*g.block());
}

}  // namespace kiln::interp
