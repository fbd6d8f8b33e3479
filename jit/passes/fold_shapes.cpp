// Shape folding: a scripted method computes its shapes at run time — prim::shape and prim::size of its
// tensors, list arithmetic over them, prim::reshape with a list built from them, asserts that compare
// them — so shape propagation alone types nothing past the first such reshape, and the fusion passes,
// which need types, leave the whole forward op by op (the GPT's eval forward ran unfused). A compiled
// signature fixes every known dim, so these are constants of the compiled graph: this pass evaluates
// them, types the views built from them (prim::reshape, prim::transpose, prim::slice), turns numbers
// made tensors and small aranges into constants, types the tensors torch.zeros / new_zeros make of such
// sizes (an RNN's zero state, whose shape checks follow), drops Optional checks of values typed as tensors and
// the broadcast of an in-place result already of its target's type.
// Each typed view exposes the next prim::shape, so it repeats with shape propagation and constant
// folding (which removes the asserts whose conditions became constants) until nothing changes.
// Symbolic and unknown dims are left alone: their values belong to the run.
#include <algorithm>
#include <unordered_map>

#include "core/ir/ivalue.h"

#include "eager/autograd/graph.h"
#include "eager/composites_einsum.h"
#include "eager/ops.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

using ir::Prim;

// Elements of a folded arange or slice of a constant held as a constant at most (memory for the graph's life).
constexpr int64_t kMaxFoldedElements = 1 << 16;

class Folder {
 public:
  explicit Folder(ir::Graph& g) : g_(g) {}

  int64_t run(ir::Block& b) {
    int64_t changed = 0;
    for (ir::Node* n : b.nodes()) {
      for (ir::Block* sub : n->blocks()) changed += run(*sub);
      if (!n->is_op()) changed += visit(n);
    }
    return changed;
  }

 private:
  // The number, bool, None or list of numbers v holds for certain; nullopt when it depends on the run.
  std::optional<IValue> value_of(const ir::Value* v) {
    if (auto it = known_.find(v); it != known_.end()) return it->second;
    const ir::Node* n = v->node();
    if (n->prim() != Prim::Constant || n->outputs().size() != 1) return std::nullopt;
    if (!n->attrs().has("value")) return v->type().is_tensor() ? std::nullopt : std::optional<IValue>(IValue());  // None
    for (const auto& [k, val] : n->attrs().items()) {
      if (k != "value") continue;
      if (auto* i = std::get_if<int64_t>(&val)) return IValue(*i);
      if (auto* d = std::get_if<double>(&val)) return IValue(*d);
      if (auto* x = std::get_if<bool>(&val)) return IValue(*x);
    }
    return std::nullopt;
  }

  std::optional<int64_t> int_of(const ir::Value* v) {
    auto x = value_of(v);
    return x && x->is_int() ? std::optional<int64_t>(x->to_int()) : std::nullopt;
  }

  std::optional<Shape> ints_of(const ir::Value* v) {
    auto x = value_of(v);
    if (!x || !x->is_list()) return std::nullopt;
    Shape s;
    for (const IValue& e : x->elements()) {
      if (!e.is_int()) return std::nullopt;
      s.push_back(e.to_int());
    }
    return s;
  }

  static std::optional<Shape> static_dims(const ir::Value* v) {
    const ir::Type& t = v->type();
    if (!t.is_tensor() || !t.dtype || !t.has_static_shape()) return std::nullopt;
    return t.static_shape();
  }

  // A stand-in of v's shape with no storage, for the view functions to compute a result's shape exactly.
  static std::optional<Tensor> shape_only(const ir::Value* v) {
    auto s = static_dims(v);
    if (!s) return std::nullopt;
    return zeros({}).expand(*s);
  }

  void set_view_type(ir::Value* out, DType dt, const Shape& s) {
    ir::Type t = ir::Type::tensor(dt, s);
    if (out->type() != t && !out->type().has_static_shape()) {
      out->set_type(t);
      ++changed_types_;
    }
  }

  // prim::einsum's result from its operands' shapes, by eager's reading of the equation; an equation or
  // shapes it rejects stay untyped, for the run to raise torch's error.
  int64_t type_einsum(ir::Node* n) {
    std::vector<Shape> shapes;
    std::vector<std::optional<int64_t>> ranks;
    for (const ir::Value* v : n->inputs()) {
      auto s = static_dims(v);
      if (!s || *v->type().dtype != *n->input(0)->type().dtype) return 0;
      shapes.push_back(*s);
      ranks.push_back(int64_t(s->size()));
    }
    struct Rejected {};
    composite::detail::EinsumSpec spec;
    try {
      spec = composite::detail::parse_einsum(n->attrs().s("equation"), ranks, [](const std::string&) { throw Rejected{}; });
    } catch (const Rejected&) {
      return 0;
    }
    std::unordered_map<char, int64_t> size;  // an ellipsis' dims broadcast, as the run does
    for (size_t k = 0; k < shapes.size(); ++k)
      for (size_t i = 0; i < spec.inputs[k].size(); ++i) {
        int64_t& d = size.try_emplace(spec.inputs[k][i], shapes[k][i]).first->second;
        if (d == 1) d = shapes[k][i];
        else if (shapes[k][i] != 1 && shapes[k][i] != d) return 0;
      }
    Shape out;
    for (char c : spec.output) out.push_back(size.at(c));
    set_view_type(n->output(), *n->input(0)->type().dtype, out);
    return 0;
  }

  void replace(ir::Node* n, size_t i, ir::Value* c) {
    c->set_name(n->output(i)->name());
    n->output(i)->replace_all_uses_with(c);
  }

  // Replaces n's output i by a constant of x (a number or a bool). A list is only remembered, for the
  // nodes after it in this walk (the graph has no list constants): no change to count.
  bool settle(ir::Node* n, size_t i, const IValue& x) {
    if (x.is_list()) {
      known_[n->output(i)] = x;
      return false;
    }
    if (n->output(i)->uses().empty()) return false;
    ir::InsertPointGuard guard(g_);
    g_.set_insert_point(n);
    ir::Value* c = x.is_bool() ? g_.insert_constant(x.to_bool()) : x.is_int() ? g_.insert_constant(x.to_int())
                   : x.is_double()                                ? g_.insert_constant(x.to_double())
                                                                  : nullptr;
    if (!c) return false;
    replace(n, i, c);
    return true;
  }

  bool settle_tensor(ir::Node* n, const Tensor& t, bool wrapped) {
    if (n->output()->uses().empty() || t.numel() > kMaxFoldedElements) return false;
    ir::InsertPointGuard guard(g_);
    g_.set_insert_point(n);
    // A wrapped number keeps its mark on the tensor itself (type promotion reads it at run time), which a
    // clone drops; it is fresh anyway. A slice of a constant is a view: it gets storage of its own.
    replace(n, 0, g_.insert_constant(wrapped ? t : t.clone(), wrapped));
    return true;
  }

  int64_t visit(ir::Node* n) {
    try {
      return visit_or_throw(n);
    } catch (const Error&) {
      return 0;  // what would raise stays in the graph and raises when it runs, with its line
    }
  }

  int64_t visit_or_throw(ir::Node* n) {
    auto in = [&](size_t i) { return value_of(n->input(i)); };
    switch (n->prim()) {
      case Prim::Shape: {
        auto s = static_dims(n->input(0));
        if (!s) return 0;
        std::vector<IValue> dims(s->begin(), s->end());
        return settle(n, 0, IValue::list(std::move(dims)));
      }
      case Prim::Size: {
        auto s = static_dims(n->input(0));
        auto d = int_of(n->input(1));
        if (!s || !d) return 0;
        int64_t r = int64_t(s->size()), k = *d < 0 ? *d + r : *d;
        if (k < 0 || k >= r) return 0;
        return settle(n, 0, IValue((*s)[size_t(k)]));
      }
      case Prim::Len: {
        if (auto x = in(0); x && x->is_list()) return settle(n, 0, IValue(int64_t(x->elements().size())));
        auto s = static_dims(n->input(0));
        return s && !s->empty() ? settle(n, 0, IValue((*s)[0])) : 0;
      }
      case Prim::ListIndex: {
        auto x = in(0);
        auto i = int_of(n->input(1));
        if (!x || !x->is_list() || !i) return 0;
        int64_t len = int64_t(x->elements().size()), k = *i < 0 ? *i + len : *i;
        return k >= 0 && k < len ? settle(n, 0, x->elements()[size_t(k)]) : 0;
      }
      case Prim::ListUnpack: {
        auto x = in(0);
        if (!x || !x->is_list() || x->elements().size() != n->outputs().size()) return 0;
        int64_t c = 0;
        for (size_t i = 0; i < n->outputs().size(); ++i) c += settle(n, i, x->elements()[i]);
        return c;
      }
      case Prim::ListConstruct: {
        std::vector<IValue> es;
        for (size_t i = 0; i < n->inputs().size(); ++i) {
          auto x = in(i);
          if (!x || !x->is_int()) return 0;
          es.push_back(*x);
        }
        return settle(n, 0, IValue::list(std::move(es)));
      }
      case Prim::ListAdd: {
        auto a = in(0), b = in(1);
        if (!a || !b || !a->is_list() || !b->is_list()) return 0;
        std::vector<IValue> es = a->elements();
        es.insert(es.end(), b->elements().begin(), b->elements().end());
        return settle(n, 0, IValue::list(std::move(es)));
      }
      case Prim::ListSlice: {
        auto x = in(0);
        auto b = int_of(n->input(1)), e = int_of(n->input(2));
        if (!x || !x->is_list() || !b || !e) return 0;
        const auto& es = x->elements();
        int64_t len = int64_t(es.size());
        auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + len : i, int64_t(0), len); };
        int64_t lo = clamp(*b), hi = std::max(lo, clamp(*e));
        return settle(n, 0, IValue::list(std::vector<IValue>(es.begin() + lo, es.begin() + hi)));
      }
      case Prim::IsNone: {
        const ir::Type& t = n->input(0)->type();
        if (t.is_tensor()) return settle(n, 0, IValue(false));
        if (t.kind == ir::TypeKind::None) return settle(n, 0, IValue(true));
        return 0;
      }
      case Prim::ToFloat: {  // math.sqrt(k.size(-1)): an int made a float
        auto x = in(0);
        if (!x || !(x->is_int() || x->is_double())) return 0;
        return settle(n, 0, IValue(x->is_int() ? double(x->to_int()) : x->to_double()));
      }
      case Prim::Not: {
        auto x = in(0);
        return x && x->is_bool() ? settle(n, 0, IValue(!x->to_bool())) : 0;
      }
      case Prim::Unwrap: {  // of a value typed as a tensor: never None
        if (!n->input(0)->type().is_tensor() || n->output()->uses().empty()) return 0;
        n->output()->replace_all_uses_with(n->input(0));
        return 1;
      }
      case Prim::InplaceResult: {  // `out += identity` (a ResNet block): of the same type as self, the result itself
        const ir::Type &r = n->input(0)->type(), &self = n->input(1)->type();
        if (!r.has_static_shape() || !r.dtype || r != self || n->output()->uses().empty()) return 0;
        n->output()->replace_all_uses_with(n->input(0));
        return 1;
      }
      case Prim::NumToTensor: {
        auto x = in(0);
        if (!x || !(x->is_int() || x->is_double() || x->is_bool())) return 0;
        Scalar s = x->is_bool() ? Scalar(x->to_bool()) : x->is_int() ? Scalar(x->to_int()) : Scalar(x->to_double());
        return settle_tensor(n, Tensor::wrap_scalar(s), /*wrapped=*/true);
      }
      case Prim::Arange: {
        auto a = in(0), b = in(1), c = in(2);
        auto num = [](const IValue& v) { return v.is_int() ? Scalar(v.to_int()) : Scalar(v.to_double()); };
        if (!a || !b || !c || !(a->is_int() || a->is_double()) || !(b->is_int() || b->is_double()) ||
            !(c->is_int() || c->is_double()))
          return 0;
        bool ints = a->is_int() && b->is_int() && c->is_int();
        DType dt = n->attrs().has("dtype") ? n->attrs().dtype("dtype") : ints ? DType::Int64 : default_dtype();
        NoGradGuard no_grad;
        return settle_tensor(n, arange(num(*a), num(*b), num(*c), TensorOptions(dt)), false);
      }
      case Prim::Reshape: {
        auto s = static_dims(n->input(0));
        auto want = ints_of(n->input(1));
        if (!s || !want) return 0;
        int64_t numel = 1, rest = 1, infer = -1;
        for (int64_t d : *s) numel *= d;
        for (size_t i = 0; i < want->size(); ++i) {
          if ((*want)[i] == -1 && infer < 0) infer = int64_t(i);
          else if ((*want)[i] < 0) return 0;
          else rest *= (*want)[i];
        }
        if (infer >= 0) {
          if (rest == 0 || numel % rest) return 0;
          (*want)[size_t(infer)] = numel / rest;
        } else if (rest != numel) {
          return 0;
        }
        set_view_type(n->output(), *n->input(0)->type().dtype, *want);
        return 0;
      }
      case Prim::Transpose: {
        auto x = shape_only(n->input(0));
        auto a = int_of(n->input(1)), b = int_of(n->input(2));
        if (!x || !a || !b) return 0;
        set_view_type(n->output(), *n->input(0)->type().dtype, x->transpose(*a, *b).sizes());
        return 0;
      }
      case Prim::Full: {  // torch.zeros(L, x.size(0), H), weight.new_zeros(...): a state whose shape checks follow
        auto want = ints_of(n->input(0));
        if (!want || std::any_of(want->begin(), want->end(), [](int64_t d) { return d < 0; })) return 0;
        set_view_type(n->output(), n->attrs().has("dtype") ? n->attrs().dtype("dtype") : DType::Float32, *want);
        return 0;
      }
      case Prim::DTypeOf: {  // new_zeros' dtype, that of a tensor typed here
        const ir::Type& t = n->input(0)->type();
        return t.is_tensor() && t.dtype ? settle(n, 0, IValue(int64_t(*t.dtype))) : 0;
      }
      case Prim::CastTo: {
        auto s = static_dims(n->input(0));
        auto code = int_of(n->input(1));
        if (!s || !code || *code < 0 || *code >= kNumDTypes) return 0;
        set_view_type(n->output(), DType(*code), *s);
        return 0;
      }
      case Prim::Einsum: return type_einsum(n);
      case Prim::IndexPut: {  // x's shape and dtype
        if (auto s = static_dims(n->input(0))) set_view_type(n->output(), *n->input(0)->type().dtype, *s);
        return 0;
      }
      case Prim::Slice: {
        auto dim = int_of(n->input(1)), step = int_of(n->input(4));
        auto lo = in(2), hi = in(3);
        if (!dim || !step || !lo || !hi || !(lo->is_none() || lo->is_int()) || !(hi->is_none() || hi->is_int())) return 0;
        auto bound = [](const IValue& v) { return v.is_none() ? std::nullopt : std::optional<int64_t>(v.to_int()); };
        if (const Tensor* c = tensor_constant(n->input(0))) {
          NoGradGuard no_grad;
          return settle_tensor(n, c->slice(*dim, bound(*lo), bound(*hi), *step), false);
        }
        auto x = shape_only(n->input(0));
        if (!x) return 0;
        set_view_type(n->output(), *n->input(0)->type().dtype, x->slice(*dim, bound(*lo), bound(*hi), *step).sizes());
        return 0;
      }
      default: return 0;
    }
  }

 public:
  int64_t changed_types_ = 0;

 private:
  ir::Graph& g_;
  // Rebuilt by each walk: folding between walks destroys nodes, and a value's address may be reused.
  std::unordered_map<const ir::Value*, IValue> known_;
};

}  // namespace

PassResult fold_shapes(ir::Graph& g) {
  int64_t total = 0;
  for (int round = 0; round < 100; ++round) {
    Folder f(g);
    int64_t k = f.run(*g.block());
    k += f.changed_types_;
    k += propagate_shapes(g).changes;
    k += fold_constants(g).changes;
    if (k == 0) break;
    total += k;
  }
  return {total, {}};
}

}  // namespace kiln::jit
