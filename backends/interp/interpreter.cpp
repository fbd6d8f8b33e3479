#include "backends/interp/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "backends/interp/number_ops.h"
#include "core/ir/printer.h"
#include "eager/dispatch.h"
#include "eager/ops.h"
#include "eager/slice_scatter.h"
#include "eager/slice_scatter.h"

namespace kiln::interp {

namespace {

using ir::Block;
using ir::Node;
using ir::Prim;
using ir::Value;

}  // namespace

// Values live in numbered slots; each block's nodes become steps naming their input and output
// slots (and, at the top level, the slots whose value is dead after the step), so a call does no
// lookups by pointer.
struct Plan::Step {
  const Node* node;
  std::vector<int> in, out, dead;
};
struct Plan::BlockPlan {
  std::vector<Step> steps;
  std::vector<int> args, results;
};

Plan::Plan(const ir::Graph& g, bool free_dead_values) : graph_(g) {
  std::unordered_map<const Value*, int> slot;
  auto number = [&](const Value* v) { return slot.emplace(v, int(slot.size())).first->second; };
  std::function<void(const Block&)> build = [&](const Block& b) {
    auto& owned = blocks_[&b];
    owned = std::make_unique<BlockPlan>();
    BlockPlan& bp = *owned;
    for (const Value* a : b.inputs()) bp.args.push_back(number(a));
    for (Node* n : b.nodes()) {
      Step s{n, {}, {}, {}};
      for (const Value* v : n->inputs()) {
        auto it = slot.find(v);
        if (it == slot.end()) fail("interp: {} reads a value before its definition (run the verifier)", n->kind_name());
        s.in.push_back(it->second);
      }
      for (Block* sub : n->blocks()) build(*sub);
      for (const Value* v : n->outputs()) s.out.push_back(number(v));
      bp.steps.push_back(std::move(s));
    }
    for (const Value* v : b.outputs()) bp.results.push_back(slot.at(v));
  };
  build(*g.block());
  num_slots_ = int(slot.size());
  if (!free_dead_values) return;
  // The last top-level step reading each top-level value; graph outputs are never released.
  BlockPlan& top = *blocks_.at(g.block());
  std::unordered_map<const Node*, size_t> step_of;  // any node → its enclosing top-level step
  std::function<void(const Block&, size_t)> walk = [&](const Block& b, size_t k) {
    for (Node* n : b.nodes()) {
      step_of[n] = k;
      for (Block* sub : n->blocks()) walk(*sub, k);
    }
  };
  for (size_t k = 0; k < top.steps.size(); ++k) {
    step_of[top.steps[k].node] = k;
    for (Block* sub : top.steps[k].node->blocks()) walk(*sub, k);
  }
  std::unordered_set<const Value*> outputs(g.outputs().begin(), g.outputs().end());
  auto consider = [&](const Value* v) {
    if (outputs.count(v)) return;
    size_t last = 0;
    bool any = false;
    for (const ir::Use& u : v->uses()) {
      auto it = step_of.find(u.user);
      if (it == step_of.end()) return;  // read by a block's Return: keep
      last = any ? std::max(last, it->second) : it->second;
      any = true;
    }
    if (any) top.steps[last].dead.push_back(slot.at(v));
  };
  for (const Value* v : g.inputs()) consider(v);
  for (Node* n : g.block()->nodes())
    for (const Value* v : n->outputs()) consider(v);
}

Plan::~Plan() = default;

const Plan::BlockPlan& Plan::block_plan(const ir::Block& b) const { return *blocks_.at(&b); }

namespace {

class Frame {
 public:
  Frame(const Plan& plan, NodeRunner* runner) : plan_(plan), g_(plan.graph()), runner_(runner), env_(size_t(plan.num_slots())) {}

  // Runs b with its arguments bound to args and returns its results.
  std::vector<IValue> block(const Block& b, std::vector<IValue> args) {
    const Plan::BlockPlan& bp = plan_.block_plan(b);
    for (size_t i = 0; i < args.size(); ++i) env_[size_t(bp.args[i])] = std::move(args[i]);
    const Plan::Step* saved = step_;  // a nested block runs inside its owner's step
    for (const Plan::Step& s : bp.steps) {
      step_ = &s;
      const Node& n = *s.node;
      try {
        if (!(runner_ && delegate(s))) node(n);
        for (int d : s.dead) env_[size_t(d)] = IValue();
      } catch (const Error& e) {
        if (std::string_view(e.what()).rfind("interp: ", 0) == 0) throw;
        fail("interp: line {} ({}): {}", line_of(n), n.kind_name(), e.what());
      }
    }
    step_ = saved;
    std::vector<IValue> results;
    results.reserve(bp.results.size());
    for (int r : bp.results) results.push_back(env_[size_t(r)]);
    return results;
  }

 private:
  int line_of(const Node& n) {
    if (n.line) return n.line;
    if (!printed_) printed_ = std::make_unique<ir::PrintedGraph>(ir::print_graph(g_));
    auto it = printed_->lines.find(&n);
    return it == printed_->lines.end() ? 0 : it->second;
  }

  void out(size_t i, IValue x) { env_[size_t(step_->out[i])] = std::move(x); }

  bool delegate(const Plan::Step& s) {
    std::vector<IValue> ins, outs;
    ins.reserve(s.in.size());
    for (int i : s.in) ins.push_back(env_[size_t(i)]);
    if (!runner_->run(*s.node, ins, outs)) return false;
    if (outs.size() != s.out.size())
      fail("{} produced {} outputs, the node has {}", s.node->kind_name(), outs.size(), s.out.size());
    for (size_t i = 0; i < outs.size(); ++i) env_[size_t(s.out[i])] = std::move(outs[i]);
    return true;
  }

  const IValue& in(const Node& n, size_t i) const {
    (void)n;
    return env_[size_t(step_->in.at(i))];
  }

  void node(const Node& n) {
    if (n.is_op()) return op(n);
    switch (n.prim()) {
      case Prim::Param:
      case Prim::Return:
      case Prim::Op: fail("interp: {} cannot appear in a block's node list", n.kind_name());
      case Prim::Constant: return out(0, constant(n));
      case Prim::If: return run_if(n);
      case Prim::Loop: return run_loop(n);
      case Prim::FusionGroup: {
        const Block& body = *n.blocks()[0];
        std::vector<IValue> args;
        for (size_t i = 0; i < n.inputs().size(); ++i) args.push_back(in(n, i));
        std::vector<IValue> r = block(body, std::move(args));
        for (size_t i = 0; i < r.size(); ++i) out(i, std::move(r[i]));
        return;
      }
      case Prim::TupleConstruct:
      case Prim::ListConstruct: {
        std::vector<IValue> es;
        for (size_t i = 0; i < n.inputs().size(); ++i) es.push_back(in(n, i));
        return out(0, n.prim() == Prim::TupleConstruct ? IValue::tuple(std::move(es)) : IValue::list(std::move(es)));
      }
      case Prim::TupleUnpack:
      case Prim::ListUnpack: {
        const auto& es = in(n, 0).elements();
        if (es.size() != n.outputs().size())
          fail("cannot unpack {} values into {}", es.size(), n.outputs().size());
        for (size_t i = 0; i < es.size(); ++i) out(i, es[i]);
        return;
      }
      case Prim::TupleIndex: return out(0, index(in(n, 0), n.attrs().i("index")));
      case Prim::ListIndex: return out(0, index(in(n, 0), in(n, 1).to_int()));
      case Prim::Len: {
        IValue x = in(n, 0);
        if (x.is_tensor()) {
          if (x.to_tensor().dim() == 0) fail("len() of a 0-d tensor");
          return out(0, x.to_tensor().size(0));
        }
        return out(0, int64_t(x.elements().size()));
      }
      case Prim::Size: return out(0, in(n, 0).to_tensor().size(in(n, 1).to_int()));
      case Prim::Shape: {
        std::vector<IValue> dims;
        for (int64_t d : in(n, 0).to_tensor().sizes()) dims.emplace_back(d);
        return out(0, IValue::list(std::move(dims)));
      }
      case Prim::ToBool: return out(0, to_bool(in(n, 0)));
      case Prim::ToInt: {
        IValue x = in(n, 0);
        if (x.is_tensor()) return out(0, int64_t(scalar_of(x.to_tensor(), "int")));
        if (x.is_double()) return out(0, int64_t(std::trunc(checked_finite(x.to_double()))));
        return out(0, x.to_int());
      }
      case Prim::ToFloat: {
        IValue x = in(n, 0);
        return out(0, x.is_tensor() ? scalar_of(x.to_tensor(), "float") : x.to_double());
      }
      case Prim::NumToTensor: {
        IValue x = in(n, 0);
        Scalar s = x.is_bool() ? Scalar(x.to_bool()) : x.is_int() ? Scalar(x.to_int()) : Scalar(x.to_double());
        return out(0, Tensor::wrap_scalar(s));
      }
      case Prim::IsNone: return out(0, in(n, 0).is_none());
      case Prim::Unwrap: {
        IValue x = in(n, 0);
        if (x.is_none()) fail("unwrapped an Optional that is None");
        return out(0, x);
      }
      case Prim::Reshape: return out(0, reshape(in(n, 0).to_tensor(), ints_of(in(n, 1))));
      case Prim::Full: {
        IValue v = in(n, 1);
        Scalar s = v.is_bool() ? Scalar(v.to_bool()) : v.is_int() ? Scalar(v.to_int()) : Scalar(v.to_double());
        DType dt = n.attrs().has("dtype") ? n.attrs().dtype("dtype") : DType::Float32;
        return out(0, full(ints_of(in(n, 0)), s, dt));
      }
      case Prim::RandLike: return out(0, rand_like(in(n, 0).to_tensor()));
      case Prim::Slice: {
        auto bound = [&](size_t i) { return in(n, i).is_none() ? std::nullopt : std::optional<int64_t>(in(n, i).to_int()); };
        return out(0, in(n, 0).to_tensor().slice(in(n, 1).to_int(), bound(2), bound(3), in(n, 4).to_int()));
      }
      case Prim::ListCat: {
        Tensors xs;
        for (const IValue& e : in(n, 0).elements()) xs.push_back(e.to_tensor());
        bool stack_ = n.attrs().has("stack") && n.attrs().i("stack") != 0;
        return out(0, stack_ ? stack(xs, in(n, 1).to_int()) : cat(xs, in(n, 1).to_int()));
      }
      case Prim::Transpose: return out(0, in(n, 0).to_tensor().transpose(in(n, 1).to_int(), in(n, 2).to_int()));
      case Prim::SliceScatter: {
        auto bound = [&](size_t i) { return in(n, i).is_none() ? std::nullopt : std::optional<int64_t>(in(n, i).to_int()); };
        return out(0, slice_scatter(in(n, 0).to_tensor(), in(n, 1).to_tensor(), in(n, 2).to_int(), bound(3), bound(4),
                                    in(n, 5).to_int()));
      }
      case Prim::SelectScatter:
        return out(0, select_scatter(in(n, 0).to_tensor(), in(n, 1).to_tensor(), in(n, 2).to_int(), in(n, 3).to_int()));
      case Prim::InplaceResult: {
        const Tensor& r = in(n, 0).to_tensor();
        const Tensor& self = in(n, 1).to_tensor();
        bool copy = n.attrs().has("copy") && n.attrs().i("copy") != 0;  // copy_ / fill_ cast freely
        if (!copy && !can_cast(r.dtype(), self.dtype()))
          fail("result type {} can't be cast to the desired output type {}", dtype_name(r.dtype()), dtype_name(self.dtype()));
        if (r.sizes() == self.sizes()) return out(0, r.to(self.dtype()));
        bool fits = r.dim() <= self.dim();
        for (int64_t k = 1; fits && k <= r.dim(); ++k)
          fits = r.sizes()[size_t(r.dim() - k)] == 1 || r.sizes()[size_t(r.dim() - k)] == self.sizes()[size_t(self.dim() - k)];
        if (!fits)
          fail("output with shape {} doesn't match the broadcast shape {}", shape_str(self.sizes()), shape_str(r.sizes()));
        return out(0, r.to(self.dtype()).expand(self.sizes()).contiguous());
      }
      case Prim::Detach: return out(0, in(n, 0).to_tensor().detach());
      case Prim::FloorDivide: return out(0, floor_divide(in(n, 0).to_tensor(), in(n, 1).to_tensor()));
      case Prim::Remainder: return out(0, remainder(in(n, 0).to_tensor(), in(n, 1).to_tensor()));
      case Prim::Print: {
        std::string line;
        for (size_t i = 0; i < n.inputs().size(); ++i) {
          if (i) line += ' ';
          line += python_str(in(n, i));
        }
        fmt::print("{}\n", line);
        std::fflush(stdout);
        return;
      }
      case Prim::ListAdd: {
        std::vector<IValue> es = in(n, 0).elements();
        const auto& more = in(n, 1).elements();
        es.insert(es.end(), more.begin(), more.end());
        return out(0, IValue::list(std::move(es)));
      }
      case Prim::ListSlice: {
        const auto& es = in(n, 0).elements();
        int64_t len = int64_t(es.size());
        auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + len : i, int64_t(0), len); };
        int64_t b = clamp(in(n, 1).to_int()), e = clamp(in(n, 2).to_int());
        return out(0, IValue::list(std::vector<IValue>(es.begin() + b, es.begin() + std::max(b, e))));
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
      case Prim::Max: return out(0, number_binary(n.prim(), in(n, 0), in(n, 1)));
      case Prim::NumNeg: {
        IValue x = in(n, 0);
        return out(0, x.is_double() ? IValue(-x.to_double()) : IValue(-x.to_int()));
      }
      case Prim::Not: return out(0, !to_bool(in(n, 0)));
    }
  }

  // torch's can_cast for in-place results: no float into an integer tensor, nothing but bool into bool.
  static bool can_cast(DType from, DType to) {
    if (is_floating(from) && !is_floating(to)) return false;
    if (from != DType::Bool && to == DType::Bool) return false;
    return true;
  }

  // What Python's print writes for a value (str(), with repr() inside tuples and lists).
  static std::string python_str(const IValue& v, bool inner = false) {
    if (v.is_none()) return "None";
    if (v.is_bool()) return v.to_bool() ? "True" : "False";
    if (v.is_int()) return std::to_string(v.to_int());
    if (v.is_double()) {
      double d = v.to_double();
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      std::string s = fmt::format("{}", d);
      if (s.find_first_of(".e") == std::string::npos) s += ".0";
      return s;
    }
    if (v.is_string()) return inner ? fmt::format("'{}'", v.to_string()) : v.to_string();
    if (v.is_tensor()) return v.to_tensor().str();
    std::string s = v.is_tuple() ? "(" : "[";
    const auto& es = v.elements();
    for (size_t i = 0; i < es.size(); ++i) {
      if (i) s += ", ";
      s += python_str(es[i], true);
    }
    if (v.is_tuple() && es.size() == 1) s += ",";
    return s + (v.is_tuple() ? ")" : "]");
  }

  static Shape ints_of(const IValue& list) {
    Shape s;
    for (const IValue& e : list.elements()) s.push_back(e.to_int());
    return s;
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
    for (size_t i = 0; i < outs.size(); ++i) out(i, std::move(outs[i]));
  }

  void run_if(const Node& n) {
    std::vector<IValue> r = block(*n.blocks()[to_bool(in(n, 0)) ? 0 : 1], {});
    for (size_t i = 0; i < r.size(); ++i) out(i, std::move(r[i]));
  }

  void run_loop(const Node& n) {
    int64_t trip = in(n, 0).to_int();
    bool cond = to_bool(in(n, 1));
    std::vector<IValue> carried;
    for (size_t i = 2; i < n.inputs().size(); ++i) carried.push_back(in(n, i));
    const Block& body = *n.blocks()[0];
    for (int64_t it = 0; it < trip && cond; ++it) {
      std::vector<IValue> args{IValue(it)};
      args.insert(args.end(), carried.begin(), carried.end());
      std::vector<IValue> r = block(body, std::move(args));
      cond = to_bool(r[0]);
      for (size_t i = 0; i < carried.size(); ++i) carried[i] = std::move(r[i + 1]);
    }
    for (size_t i = 0; i < carried.size(); ++i) out(i, std::move(carried[i]));
  }

  const Plan& plan_;
  const ir::Graph& g_;
  NodeRunner* runner_;
  std::vector<IValue> env_;
  const Plan::Step* step_ = nullptr;
  std::unique_ptr<ir::PrintedGraph> printed_;
};

}  // namespace

std::vector<IValue> run(const Plan& plan, const std::vector<IValue>& inputs, NodeRunner* runner) {
  return run(plan, std::vector<IValue>(inputs), runner);
}

std::vector<IValue> run(const Plan& plan, std::vector<IValue>&& inputs, NodeRunner* runner) {
  const ir::Graph& g = plan.graph();
  if (inputs.size() != g.inputs().size())
    fail("interp: the graph takes {} inputs, got {}", g.inputs().size(), inputs.size());
  Frame f(plan, runner);
  return f.block(*g.block(), std::move(inputs));
}

std::vector<IValue> run(const ir::Graph& g, const std::vector<IValue>& inputs, NodeRunner* runner,
                        bool free_dead_values) {
  return run(Plan(g, free_dead_values), inputs, runner);
}

}  // namespace kiln::interp
