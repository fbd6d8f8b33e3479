// A composite's ops as graph nodes: what eager knows now (a rank, a shape) is known here only for values
// whose type says it, so the rest (a shape check) becomes nodes that run with the graph.
#include "script_frontend/lowering_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "core/shapes_broadcast.h"
#include "eager/autocast/autocast.h"
#include "eager/ops.h"

namespace kiln::script {

using ir::Prim;

namespace {
const Type kInt = Type::scalar(TypeKind::Int);
const Type kBool = Type::scalar(TypeKind::Bool);
}  // namespace

std::vector<Value*> autocast_values(Lowerer& L, AutocastPolicy policy, const std::vector<Value*>& inputs) {
  if (!autocast_enabled() || policy == AutocastPolicy::None) return inputs;
  ir::Node* n = L.graph().create(Prim::Autocast, 0);
  std::vector<size_t> at;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i] && inputs[i]->type().is_tensor()) {
      n->add_input(inputs[i]);
      at.push_back(i);
    }
  if (at.empty()) return inputs;
  n->attrs().set("policy", std::string(autocast_policy_name(policy))).set("dtype", autocast_dtype());
  std::vector<Value*> out = inputs;
  for (size_t i : at) {
    Value* v = n->add_output();
    v->set_type(Type::tensor());
    out[i] = v;
  }
  L.emit(n);
  return out;
}

Value* LoweringBuilder::op(OpId id, const std::vector<V>& inputs, const Attrs& attrs) { return L_.op(id, inputs, attrs); }

Value* LoweringBuilder::scalar(Scalar v) {
  if (v.type == DType::Int64) return L_.number_to_tensor(L_.constant(v.i));
  if (v.type == DType::Bool) return L_.number_to_tensor(L_.constant(v.i != 0));
  return L_.number_to_tensor(L_.constant(v.v));
}

Value* LoweringBuilder::detach(V x) { return L_.prim(Prim::Detach, {x}, Type::tensor()); }

Value* LoweringBuilder::parameter(const Tensor& t, const std::string& name) {
  if (!t.defined()) return nullptr;
  Value* v = L_.tensor_of(Static::of_tensor(t, true), prefix_ + name);
  tensors_[v] = t;
  return v;
}

Value* LoweringBuilder::reshape_like(V x, V like, const Shape& tail) {
  Type li = Type::list(kInt);
  Value* shape = L_.prim(Prim::Shape, {like}, li);
  if (!tail.empty()) {
    std::vector<Value*> es;
    for (int64_t d : tail) es.push_back(L_.constant(d));
    shape = L_.prim(Prim::ListAdd, {shape, L_.prim(Prim::ListConstruct, es, li)}, li);
  }
  return L_.prim(Prim::Reshape, {x, shape}, Type::tensor());
}

// shape + [1] * (rank - len(shape)), as a slice of a list of `rank` ones.
Value* LoweringBuilder::pad_rank(V x, int64_t rank) {
  Type li = Type::list(kInt);
  Value* shape = L_.prim(Prim::Shape, {x}, li);
  std::vector<Value*> ones(size_t(rank), L_.constant(int64_t(1)));
  Value* missing = L_.prim(Prim::NumSub, {L_.constant(rank), L_.prim(Prim::Len, {shape}, kInt)}, kInt);
  Value* pad = L_.prim(Prim::ListSlice, {L_.prim(Prim::ListConstruct, ones, li), L_.constant(int64_t(0)), missing}, li);
  return L_.prim(Prim::Reshape, {x, L_.prim(Prim::ListAdd, {shape, pad}, li)}, Type::tensor());
}

Value* LoweringBuilder::transpose(V x, int64_t d0, int64_t d1) {
  return L_.prim(Prim::Transpose, {x, L_.constant(d0), L_.constant(d1)}, Type::tensor());
}

// x.shape[:d] + like.shape + x.shape[d + 1:], list prims over the shapes the graph sees.
Value* LoweringBuilder::unflatten_like(V x, int64_t d, V like) {
  Type li = Type::list(kInt);
  Value* xs = L_.prim(Prim::Shape, {x}, li);
  Value* head = L_.prim(Prim::ListSlice, {xs, L_.constant(int64_t(0)), L_.constant(d)}, li);
  Value* tail = L_.prim(Prim::ListSlice, {xs, L_.constant(d + 1), L_.prim(Prim::Len, {xs}, kInt)}, li);
  Value* shape = L_.prim(Prim::ListAdd, {L_.prim(Prim::ListAdd, {head, L_.prim(Prim::Shape, {like}, li)}, li), tail}, li);
  return L_.prim(Prim::Reshape, {x, shape}, Type::tensor());
}

Value* LoweringBuilder::head(V x, V n) {
  Value* end = L_.prim(Prim::ToInt, {n}, kInt);
  Value* none = L_.graph().insert_none();
  none->set_type(Type::optional(kInt));
  return L_.prim(Prim::Slice, {x, L_.constant(int64_t(0)), none, end, L_.constant(int64_t(1))}, Type::tensor());
}

Value* LoweringBuilder::reshape_rows(V x, V like, V lead) {
  Type li = Type::list(kInt);
  Value* ls = L_.prim(Prim::Shape, {like}, li);
  Value* tail = L_.prim(Prim::ListSlice, {ls, L_.prim(Prim::Len, {L_.prim(Prim::Shape, {lead}, li)}, kInt), L_.prim(Prim::Len, {ls}, kInt)}, li);
  Value* first = L_.prim(Prim::ListConstruct, {L_.prim(Prim::Size, {x, L_.constant(int64_t(0))}, kInt)}, li);
  return L_.prim(Prim::Reshape, {x, L_.prim(Prim::ListAdd, {first, tail}, li)}, Type::tensor());
}

Value* LoweringBuilder::count(V x, const Shape& dims, int64_t more_than, const ShapeMessage& msg) {
  if (std::optional<Shape> s = shape(x)) {
    int64_t n = 1;
    for (int64_t d : dims) n *= (*s)[size_t(d)];
    if (n <= more_than) fail(msg(s));
    return scalar(Scalar(n));
  }
  Value* n = L_.constant(int64_t(1));
  for (int64_t d : dims) n = L_.prim(Prim::NumMul, {n, L_.prim(Prim::Size, {x, L_.constant(d)}, kInt)}, kInt);
  if (more_than >= 0) L_.check(L_.prim(Prim::NumGt, {n, L_.constant(more_than)}, kBool), msg(std::nullopt));
  return L_.number_to_tensor(n);
}

// The bounds in int prims over x's size, so one graph serves every input size.
std::pair<Value*, Value*> LoweringBuilder::bin(V x, int64_t d, int64_t j, int64_t n) {
  Value* size = L_.prim(Prim::Size, {x, L_.constant(d)}, kInt);
  auto floor_div_n = [&](int64_t mul, int64_t add) {
    Value* v = L_.prim(Prim::NumMul, {L_.constant(mul), size}, kInt);
    if (add) v = L_.prim(Prim::NumAdd, {v, L_.constant(add)}, kInt);
    return L_.prim(Prim::NumFloorDiv, {v, L_.constant(n)}, kInt);
  };
  Value* start = floor_div_n(j, 0);
  Value* end = floor_div_n(j + 1, n - 1);  // ceil((j + 1) * size / n)
  Value* slice = L_.prim(Prim::Slice, {x, L_.constant(d), start, end, L_.constant(int64_t(1))}, Type::tensor());
  return {slice, L_.number_to_tensor(L_.prim(Prim::NumSub, {end, start}, kInt))};
}

void LoweringBuilder::update_buffer(V buffer, V value) {
  auto it = tensors_.find(buffer);
  if (it == tensors_.end()) fail("internal error: update_buffer of a value that is not a layer's buffer");
  L_.update_buffer(it->second, value);
}

// shape[:start] + [-1] + shape[end + 1:], read when the graph runs (ranks are unknown when lowering).
Value* LoweringBuilder::flatten(V x, int64_t s, int64_t e) {
  if (s == 0 && e == -1) return L_.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{-1}));
  if ((s >= 0) == (e >= 0) && s > e) fail(fmt::format("flatten: start_dim {} cannot come after end_dim {}", s, e));
  Type li = Type::list(kInt);
  Value* shape = L_.prim(Prim::Shape, {x}, li);
  Value* head = L_.prim(Prim::ListSlice, {shape, L_.constant(int64_t(0)), L_.constant(s)}, li);
  Value* out = L_.prim(Prim::ListAdd, {head, L_.prim(Prim::ListConstruct, {L_.constant(int64_t(-1))}, li)}, li);
  if (e != -1)
    out = L_.prim(Prim::ListAdd, {out, L_.prim(Prim::ListSlice, {shape, L_.constant(e + 1), L_.constant(int64_t(INT64_MAX))}, li)}, li);
  // A 0-d input flattens to one element, as in PyTorch.
  return L_.prim(Prim::Reshape, {x, out}, Type::tensor());
}

// As EagerBuilder's: float32 unless float64, whatever x's dtype turns out to be.
Value* LoweringBuilder::rand_like(V x) {
  Value* u = L_.prim(Prim::RandLike, {x}, Type::tensor());
  u->node()->attrs().set("float", int64_t(1));
  return u;
}

// Positions are a constant range cut to the lengths the graph sees, so one graph serves every length up to
// kMaxCausal; where both shapes are known the mask is a constant.
Value* LoweringBuilder::causal_mask(V q, V k) {
  std::optional<Shape> qs = shape(q), ks = shape(k);
  if (qs && ks && qs->size() >= 2 && ks->size() >= 2) {
    EagerBuilder eb;
    return L_.graph().insert_constant(eb.causal_mask(empty({(*qs)[qs->size() - 2], 0}), empty({(*ks)[ks->size() - 2], 0})));
  }
  constexpr int64_t kMaxCausal = 8192;
  Value* positions = L_.graph().insert_constant(arange(Scalar(0), Scalar(kMaxCausal), Scalar(1), TensorOptions(DType::Int64)));
  auto first = [&](V x) {
    Value* n = L_.prim(Prim::Size, {x, L_.constant(int64_t(-2))}, kInt);
    L_.check(L_.prim(Prim::NumLe, {n, L_.constant(kMaxCausal)}, kBool),
             fmt::format("scaled_dot_product_attention: is_causal supports sequences of up to {} in a script", kMaxCausal));
    return L_.prim(Prim::Slice, {positions, L_.constant(int64_t(0)), L_.constant(int64_t(0)), n, L_.constant(int64_t(1))},
                   Type::tensor());
  };
  Value* i = L_.op(OpId::Unsqueeze, {first(q)}, Attrs().set("dim", int64_t(1)));
  return L_.op(OpId::Ge, {i, first(k)});
}

Value* LoweringBuilder::if_bool(V x, const std::function<V()>& then, const std::function<V()>& otherwise) {
  if (std::optional<DType> dt = dtype(x)) return *dt == DType::Bool ? then() : otherwise();
  return L_.if_value(L_.prim(Prim::IsBool, {x}, kBool), then, otherwise, L_.loc());
}

std::vector<Value*> LoweringBuilder::autocast(std::string_view fn, const std::vector<V>& inputs) {
  return autocast_values(L_, autocast_policy(fn), inputs);
}

std::optional<int64_t> LoweringBuilder::rank(V x) {
  if (!x->type().dims) return std::nullopt;
  return int64_t(x->type().dims->size());
}

std::optional<Shape> LoweringBuilder::shape(V x) {
  if (!x->type().has_static_shape()) return std::nullopt;
  return x->type().static_shape();
}

std::optional<DType> LoweringBuilder::dtype(V x) { return x->type().dtype; }

int64_t LoweringBuilder::dim(std::string_view op, int64_t d, V x) {
  std::optional<int64_t> r = rank(x);
  if (!r) return d;  // the op wraps it when the graph runs
  if (d < -std::max<int64_t>(*r, 1) || d >= std::max<int64_t>(*r, 1))
    fail(fmt::format("{}: dim {} is out of range for a tensor of rank {}", op, d, *r));
  return d < 0 ? d + std::max<int64_t>(*r, 1) : d;
}

void LoweringBuilder::check_rank(V x, const std::vector<int64_t>& ranks, const ShapeMessage& msg) {
  if (std::optional<int64_t> r = rank(x)) {
    if (std::find(ranks.begin(), ranks.end(), *r) == ranks.end()) fail(msg(shape(x)));
    return;
  }
  Value* len = L_.prim(Prim::Len, {L_.prim(Prim::Shape, {x}, Type::list(kInt))}, kInt);
  Value* ok = L_.constant(false);
  for (int64_t r : ranks)
    ok = L_.if_value(ok, [&] { return L_.constant(true); },
                     [&] { return L_.prim(Prim::NumEq, {len, L_.constant(r)}, kBool); }, L_.loc());
  L_.check(ok, msg(std::nullopt));
}

void LoweringBuilder::check_shape(V x, const Shape& want, bool trailing, const ShapeMessage& msg) {
  if (std::optional<Shape> s = shape(x)) {
    bool ok = trailing ? s->size() >= want.size() && std::equal(want.begin(), want.end(), s->end() - ptrdiff_t(want.size()))
                       : *s == want;
    if (!ok) fail(msg(s));
    return;
  }
  // At run time: the (trailing) dims, then each against `want`.
  int64_t k = int64_t(want.size());
  Type li = Type::list(kInt);
  Value* dims = L_.prim(Prim::Shape, {x}, li);
  Value* ok = L_.prim(Prim::NumEq, {L_.prim(Prim::Len, {dims}, kInt), L_.constant(k)}, kBool);
  if (trailing) {
    dims = L_.prim(Prim::ListSlice, {dims, L_.constant(-k), L_.constant(int64_t(INT64_MAX))}, li);
    ok = L_.prim(Prim::NumEq, {L_.prim(Prim::Len, {dims}, kInt), L_.constant(k)}, kBool);
  }
  for (int64_t i = 0; i < k; ++i)
    ok = L_.if_value(ok,
                     [&] {
                       Value* d = L_.prim(Prim::ListIndex, {dims, L_.constant(i)}, kInt);
                       return L_.prim(Prim::NumEq, {d, L_.constant(want[size_t(i)])}, kBool);
                     },
                     [&] { return L_.constant(false); }, L_.loc());
  L_.check(ok, msg(std::nullopt));
}

void LoweringBuilder::check_broadcast(const std::vector<V>& xs, const std::string& msg) {
  std::vector<Shape> shapes;
  for (V x : xs)
    if (std::optional<Shape> s = shape(x)) shapes.push_back(*s);
  if (shapes.size() == xs.size()) {
    if (!shapes_broadcast(shapes)) fail(msg + shapes_list(shapes));
    return;
  }
  // torch's words with the shapes the graph sees, not a later op's broadcast error
  ir::Node* n = L_.graph().create(Prim::CheckBroadcast, 0);
  for (V x : xs) n->add_input(x);
  n->attrs().set("message", fmt::format("{}:{}: {}", L_.src().name, L_.loc().line, msg));
  L_.emit(n);
}

void LoweringBuilder::fail(const std::string& msg) { L_.fail(L_.loc(), msg); }

}  // namespace kiln::script
