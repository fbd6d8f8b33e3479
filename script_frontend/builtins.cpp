// The callable names of kiln script: torch.<function>, tensor methods and Python's builtins, each
// bound with PyTorch's parameter names and lowered to op-table rows (the elementwise and reduction rows
// by their core/ops.def names) or to composites (eager/composites.h: softmax, layer_norm, ...; small
// expansions here: mean, zeros_like, ...).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <tuple>
#include <cmath>

#include "eager/composite_losses.h"
#include "eager/composites.h"
#include "eager/composites_attention.h"
#include "eager/composites_einsum.h"
#include "eager/composites_math_ops.h"
#include "eager/composites_tensor_ops.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/lowering_builder.h"
#include "script_frontend/torch_devices.h"

namespace kiln::script {

std::optional<DType> torch_dtype(const Expr& e) {
  if (e.kind != ExprKind::Attribute || e.args[0]->kind != ExprKind::Name || e.args[0]->name != "torch") return std::nullopt;
  static const std::pair<const char*, DType> names[] = {
      {"float32", DType::Float32}, {"float", DType::Float32},  {"float64", DType::Float64}, {"double", DType::Float64},
      {"int64", DType::Int64},     {"long", DType::Int64},     {"int32", DType::Int32},     {"int", DType::Int32},
      {"bool", DType::Bool},       {"float16", DType::Float16}, {"half", DType::Float16},   {"bfloat16", DType::BFloat16}};
  for (auto& [n, d] : names)
    if (e.name == n) return d;
  return std::nullopt;
}

using ir::Prim;

namespace {

const Type kInt = Type::scalar(TypeKind::Int);
const Type kFloat = Type::scalar(TypeKind::Float);
const Type kBool = Type::scalar(TypeKind::Bool);

using Args = std::vector<Arg>;
using Handler = std::function<Value*(Lowerer&, Args&, const Expr&)>;

// kF: torch.nn.functional (F.relu, F.dropout, ...); torch functions are reachable through F too
// when PyTorch has them there (kFn | kF).
enum Where : uint8_t { kFn = 1, kMethod = 2, kPython = 4, kF = 8 };

struct Builtin {
  std::string name;
  unsigned where;
  std::vector<std::string> params;  // the first is self for methods
  size_t required;
  Handler lower;
  bool varargs = false;  // x.view(2, 3): every positional after self is one int of params[1]
};

std::string display(const Builtin& b, bool method, bool functional = false) {
  if (method) return "Tensor." + b.name;
  if (functional) return "F." + b.name;
  return b.where & kPython ? b.name : "torch." + b.name;
}

Value* reduce(Lowerer& L, OpId id, Value* x, const Arg& dim, const Arg& keepdim) {
  Shape dims;
  if (dim.present() && !(dim.expr && dim.expr->kind == ExprKind::None)) dims = L.need_ints(dim, "dim");
  bool kd = keepdim.present() ? L.need_bool(keepdim, "keepdim") : false;
  return L.op(id, {x}, Attrs().set("dims", dims).set("keepdim", kd));
}

Value* count_of(Lowerer& L, Value* x, const Shape& dims) {
  if (dims.empty()) {
    Value* flat = L.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{-1}));
    return L.prim(Prim::Size, {flat, L.constant(int64_t(0))}, kInt);
  }
  Value* n = nullptr;
  for (int64_t d : dims) {
    Value* s = L.prim(Prim::Size, {x, L.constant(d)}, kInt);
    n = n ? L.prim(Prim::NumMul, {n, s}, kInt) : s;
  }
  return n;
}


// A tensor shaped like x filled with v: where(true, v, x) broadcasts v to x's shape in x's dtype.
Value* filled_like(Lowerer& L, Value* x, Value* v) {
  Value* yes = L.number_to_tensor(L.constant(true));
  return L.op(OpId::Where, {yes, L.number_to_tensor(v), x});
}

// A tensor of a module the argument names (`self.running_mean`, `self.emb.weight`), or null: what a composite
// updates in place or whose size it needs now.
std::optional<Tensor> module_tensor(Lowerer& L, const Arg& a) {
  if (!a.expr || a.value || a.expr->kind != ExprKind::Attribute) return std::nullopt;
  const Object* o = L.static_object(*a.expr->args[0]);
  if (!o) return std::nullopt;
  const std::string& name = a.expr->name;
  if (const Static* v = o->attr(name); v && v->kind == Static::Kind::Tensor) return v->tensor;
  for (const auto& [n, t] : o->module->named_parameters(false))
    if (n == name) return t;
  for (const auto& [n, t] : o->module->named_buffers(false))
    if (n == name) return t;
  return std::nullopt;
}

// `self.bn.running_mean` as a graph input's name
std::string describe_attribute(const Expr& e) {
  if (e.kind == ExprKind::Name) return e.name;
  if (e.kind == ExprKind::Attribute) return describe_attribute(*e.args[0]) + "." + e.name;
  return "tensor";
}

double need_float(Lowerer& L, const Arg& a, std::string_view what) {
  if (auto f = L.const_float(a)) return *f;
  L.fail(a.loc, fmt::format("{} must be a number constant in kiln script", what));
}

Shape pair_of(Lowerer& L, const Arg& a, std::string_view what) {
  Shape s = L.need_ints(a, what);
  if (s.size() == 1) return {s[0], s[0]};
  if (s.size() != 2) L.fail(a.loc, fmt::format("{} must be an int or a pair of ints", what));
  return s;
}

// An int argument, constant or computed at run time.
Value* int_arg(Lowerer& L, const Arg& a, std::string_view what) {
  Value* v = L.value_of(a);
  if (v->type().kind != TypeKind::Int && v->type().kind != TypeKind::Bool)
    L.fail(a.loc, fmt::format("{} expects int, got {}", what, v->type().str()));
  return v;
}

// A tuple value's entries, each an int (else `error` at loc): one prim::TupleIndex each.
std::vector<Value*> tuple_ints(Lowerer& L, Value* v, SourceLoc loc, const std::string& error) {
  std::vector<Value*> es;
  for (size_t i = 0; i < v->type().elems.size(); ++i) {
    if (v->type().elems[i].kind != TypeKind::Int) L.fail(loc, error);
    ir::Node* n = L.graph().create(Prim::TupleIndex, 1);
    n->add_input(v);
    n->attrs().set("index", int64_t(i));
    n->output()->set_type(kInt);
    es.push_back(L.emit(n)->output());
  }
  return es;
}

// A shape as a List[int] value: a list or tuple written out (entries constant or not) or a list value.
Value* int_list(Lowerer& L, const Arg& a, std::string_view what) {
  if (a.expr && (a.expr->kind == ExprKind::Tuple || a.expr->kind == ExprKind::List)) {
    std::vector<Value*> es;
    for (const auto& e : a.expr->args) es.push_back(int_arg(L, Arg{e.get(), nullptr, e->loc}, what));
    return L.prim(Prim::ListConstruct, es, Type::list(kInt));
  }
  Value* v = L.value_of(a);
  if (v->type().kind == TypeKind::Int) return L.prim(Prim::ListConstruct, {v}, Type::list(kInt));
  if (v->type().kind == TypeKind::List && v->type().elems[0].kind == TypeKind::Int) return v;
  if (v->type().kind == TypeKind::Tuple)
    return L.prim(Prim::ListConstruct, tuple_ints(L, v, a.loc, fmt::format("{} expects ints, got {}", what, v->type().str())),
                  Type::list(kInt));
  L.fail(a.loc, fmt::format("{} expects ints or a list of ints, got {}", what, v->type().str()));
}

bool is_given(const Arg& g) { return g.present() && !(g.expr && g.expr->kind == ExprKind::None); }

// A device string written out or bound at module level (`device = torch.device('cuda' if ... else 'cpu')`).
bool device_string(Lowerer& L, const Arg& a) {
  if (a.value) return false;
  std::optional<std::string> s = L.const_str(a);
  return s && is_device_string(*s);
}

// A factory's device= argument: a graph makes its tensors where it runs, so the device a forward passes
// (`device=idx.device`, nanoGPT's) changes nothing; it must still be one (a tensor's .device, a string, None).
void check_device(Lowerer& L, const Arg& a) {
  if (!a.present() || (a.expr && a.expr->kind == ExprKind::None)) return;
  if (a.expr && a.expr->kind == ExprKind::String) return;
  if (device_string(L, a)) return;
  Value* v = L.value_of(a);
  if (!L.is_device(v)) L.fail(a.loc, fmt::format("device must be a tensor's .device or a string, got {}", v->type().str()));
}

// A dtype= argument (None: absent): torch.float64 as written or through a name, or a tensor's .dtype, whose code
// the graph reads when it runs (the returned value; the DType is then nullopt).
struct DTypeArg {
  std::optional<DType> known;
  Value* code = nullptr;  // set when known only at run time
};
DTypeArg dtype_arg(Lowerer& L, const Arg& a, std::string_view what = "dtype must be a torch dtype such as torch.float64") {
  if (!a.present() || (a.expr && a.expr->kind == ExprKind::None)) return {};
  if (a.expr)
    if (auto d = torch_dtype(*a.expr)) return {d, nullptr};
  Value* v = L.value_of(a);
  if (!L.is_dtype(v)) L.fail(a.loc, what);
  if (v->node()->prim() == Prim::Constant) return {DType(v->node()->attrs().i("value")), nullptr};
  return {std::nullopt, v};
}

// x in a dtype given as a value known only at run time (prim::cast), or known now (the Cast row)
Value* cast_to(Lowerer& L, Value* x, const DTypeArg& dt) {
  if (dt.known) return L.op(OpId::Cast, {x}, Attrs().set("dtype", *dt.known));
  return L.prim(Prim::CastTo, {x, dt.code}, Type::tensor());
}

// The ints of a tuple or list written out, or of a tuple value (its length known when lowering).
std::vector<Value*> ints_of_sequence(Lowerer& L, const Arg& a, std::string_view what) {
  std::vector<Value*> es;
  if (a.expr && (a.expr->kind == ExprKind::Tuple || a.expr->kind == ExprKind::List)) {
    for (const auto& e : a.expr->args) es.push_back(int_arg(L, Arg{e.get(), nullptr, e->loc}, what));
    return es;
  }
  Value* v = L.value_of(a);
  if (v->type().kind == TypeKind::Tuple) {
    ir::Node* n = v->node();
    if (n->prim() == Prim::TupleConstruct) return n->inputs();
    for (size_t i = 0; i < v->type().elems.size(); ++i) {
      ir::Node* idx = L.graph().create(Prim::TupleIndex, 1);
      idx->add_input(v);
      idx->attrs().set("index", int64_t(i));
      idx->output()->set_type(v->type().elems[i]);
      es.push_back(L.emit(idx)->output());
    }
    for (Value* e : es)
      if (e->type().kind != TypeKind::Int) L.fail(a.loc, fmt::format("{} expects ints, got {}", what, v->type().str()));
    return es;
  }
  L.fail(a.loc, fmt::format("{} expects a tuple or list of ints written out, got {}", what, v->type().str()));
}

// torch.arange(n, dtype=dt) for an int n read when the graph runs
Value* arange_of(Lowerer& L, Value* n, DType dt) {
  ir::Node* range = L.graph().create(Prim::Arange, 1);
  for (Value* v : {L.constant(int64_t(0)), n, L.constant(int64_t(1))}) range->add_input(v);
  range->attrs().set("dtype", dt);
  range->output()->set_type(Type::tensor());
  return L.emit(range)->output();
}

// F.interpolate's size read when the graph runs (`size=skip.shape[2:]`, `size=(h, w)` of computed ints): one
// value for both axes or (H, W), each greater than 0, as the output positions and lengths the composite takes.
composite::RunSize<LoweringBuilder> interpolate_run_size(Lowerer& L, const Arg& a) {
  Value* sizes = int_list(L, a, "size");
  Value* n = L.prim(Prim::Len, {sizes}, kInt);
  const std::string rank_msg =
      "interpolate: input and output must have the same number of spatial dimensions, but got input with 2 spatial "
      "dimensions and an output size of another length";
  L.check(L.prim(Prim::NumGe, {n, L.constant(int64_t(1))}, kBool), rank_msg);
  L.check(L.prim(Prim::NumLe, {n, L.constant(int64_t(2))}, kBool), rank_msg);
  composite::RunSize<LoweringBuilder> r;
  for (int64_t i = 0; i < 2; ++i) {
    Value* len = L.prim(Prim::ListIndex, {sizes, i == 0 ? L.constant(int64_t(0)) : L.prim(Prim::NumSub, {n, L.constant(int64_t(1))}, kInt)}, kInt);
    L.check(L.prim(Prim::NumGt, {len, L.constant(int64_t(0))}, kBool), "interpolate: output sizes should be greater than 0");
    r.positions[i] = arange_of(L, len, DType::Float64);
    r.length[i] = L.number_to_tensor(L.prim(Prim::ToFloat, {len}, kFloat));
  }
  return r;
}

// An int read when the graph runs, as composite::same_padding computes with one: each operation a prim
struct RunInt {
  Lowerer* L;
  Value* v;
  RunInt num(Prim p, Value* b) const { return {L, L->prim(p, {v, b}, Type::scalar(TypeKind::Int))}; }
  RunInt operator-(int64_t b) const { return num(Prim::NumSub, L->constant(b)); }
  RunInt operator*(int64_t b) const { return num(Prim::NumMul, L->constant(b)); }
  RunInt operator/(int64_t b) const { return num(Prim::NumFloorDiv, L->constant(b)); }
  RunInt operator-(const RunInt& b) const { return num(Prim::NumSub, b.v); }
};

// F.pad(x, pad, mode, value) with amounts known only when the graph runs (swin's pad to a multiple of the window):
// per padded dim, a negative amount crops (prim::slice); a positive one cats blocks of v in x's dtype ('constant'),
// or the other modes pick positions with one index_select (its gradient adds a copied position's into the one it
// copies, as the composite's slices do), the index made when the graph runs from arange(-lo, n + hi): 'reflect'
// n-1 - |n-1 - |i||, 'replicate' i clamped to [0, n-1], 'circular' i mod n. Constant amounts lower eager's
// composite::pad instead.
Value* pad_at_run_time(Lowerer& L, Value* x, const std::vector<Value*>& pads, const std::string& mode, double value) {
  if (pads.size() % 2 != 0) L.fail(L.loc(), fmt::format("pad: padding length must be divisible by 2, got {}", pads.size()));
  Value* rank = L.prim(Prim::Len, {L.prim(Prim::Shape, {x}, Type::list(kInt))}, kInt);
  L.check(L.prim(Prim::NumGe, {rank, L.constant(int64_t(pads.size() / 2))}, kBool),
          fmt::format("pad: padding length too large: {} values for the input's rank", pads.size()));
  Value* zero = L.constant(int64_t(0));
  Value* y = x;
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    Value* d = L.constant(-1 - int64_t(i));
    Value *lo = pads[2 * i], *hi = pads[2 * i + 1];
    Value* size = L.prim(Prim::Size, {y, d}, kInt);
    Value* start = L.prim(Prim::Max, {L.prim(Prim::NumNeg, {lo}, kInt), zero}, kInt);
    Value* end = L.prim(Prim::NumAdd, {size, L.prim(Prim::Min, {hi, zero}, kInt)}, kInt);
    y = L.prim(Prim::Slice, {y, d, start, end, L.constant(int64_t(1))}, Type::tensor());
    if (mode != "constant") {
      Value* n = L.prim(Prim::NumSub, {end, start}, kInt);
      Value* left = L.prim(Prim::Max, {lo, zero}, kInt);
      Value* right = L.prim(Prim::Max, {hi, zero}, kInt);
      std::string at = fmt::format("at dim {} of the input", -1 - int64_t(i));
      auto lt = [&](Value* a, Value* b) { return L.prim(Prim::NumLt, {a, b}, kBool); };
      auto le = [&](Value* a, Value* b) { return L.prim(Prim::NumLe, {a, b}, kBool); };
      if (mode == "reflect") {
        for (Value* p : {left, right})
          L.check(lt(p, n), "pad: reflect padding must be less than the size of the dim it pads, " + at);
      } else if (mode == "replicate") {
        // n > 0 or nothing to pad: sum <= sum * min(n, 1)
        Value* sum = L.prim(Prim::NumAdd, {left, right}, kInt);
        L.check(le(sum, L.prim(Prim::NumMul, {sum, L.prim(Prim::Min, {n, L.constant(int64_t(1))}, kInt)}, kInt)),
                "pad: replicate padding of an empty dim, " + at);
      } else {
        for (Value* p : {left, right})
          L.check(le(p, n), "pad: circular padding wraps around more than once, " + at);
      }
      ir::Node* ar = L.graph().create(Prim::Arange, 1);
      for (Value* v : {L.prim(Prim::NumNeg, {left}, kInt), L.prim(Prim::NumAdd, {n, right}, kInt), L.constant(int64_t(1))})
        ar->add_input(v);
      ar->output()->set_type(Type::tensor());
      Value* pos = L.emit(ar)->output();
      auto wrapped = [&](Value* v) { return L.prim(Prim::NumToTensor, {v}, Type::tensor()); };
      Value* last = wrapped(L.prim(Prim::NumSub, {n, L.constant(int64_t(1))}, kInt));
      Value* index;
      if (mode == "reflect") {
        index = L.op(OpId::Sub, {last, L.op(OpId::Abs, {L.op(OpId::Sub, {last, L.op(OpId::Abs, {pos})})})});
      } else if (mode == "replicate") {
        index = L.op(OpId::Minimum, {L.op(OpId::Maximum, {pos, wrapped(zero)}), last});
      } else {
        index = L.prim(Prim::Remainder, {pos, wrapped(n)}, Type::tensor());
      }
      y = L.op(OpId::IndexSelect, {y, index}, Attrs().set("dim", -1 - int64_t(i)));
      continue;
    }
    auto block = [&](Value* amount) {
      Value* shape = L.prim(Prim::ListSet, {L.prim(Prim::Shape, {y}, Type::list(kInt)), d,
                                            L.prim(Prim::Max, {amount, zero}, kInt)}, Type::list(kInt));
      Value* filled = L.prim(Prim::Full, {shape, L.constant(value)}, Type::tensor());
      return cast_to(L, filled, DTypeArg{std::nullopt, L.prim(Prim::DTypeOf, {y}, kInt)});
    };
    Value* parts = L.prim(Prim::ListConstruct, {block(lo), y, block(hi)}, Type::list(Type::tensor()));
    y = L.prim(Prim::ListCat, {parts, d}, Type::tensor());
  }
  return y;
}

// torch.zeros / ones / empty / full: the shape may be known only at run time, the dtype too (dtype=x.dtype:
// made in float32 and cast when the graph runs).
Value* full_of(Lowerer& L, const Arg& size, Value* v, const Arg& dtype, DType def = DType::Float32) {
  DTypeArg dt = dtype_arg(L, dtype);
  Value* shape = int_list(L, size, "size");
  ir::Node* n = L.graph().create(Prim::Full, 1);
  n->add_input(shape);
  n->add_input(v);
  n->attrs().set("dtype", dt.known ? *dt.known : dt.code ? DType::Float32 : def);
  n->output()->set_type(Type::tensor());
  Value* out = L.emit(n)->output();
  return dt.code ? cast_to(L, out, dt) : out;
}


// torch.tensor(data)'s numbers: a number, or a (nested) list or tuple of them written out or built before the call,
// in order, with the shape their nesting gives (the first sequence at each depth sets its size, as torch).
struct TensorData {
  Shape shape;
  std::vector<Value*> leaves;
  bool fixed = false;  // a number was met: every depth's size is known
};

void gather_tensor_data(Lowerer& L, const Arg& a, size_t depth, TensorData& d) {
  std::vector<Arg> items;
  bool seq = a.expr && (a.expr->kind == ExprKind::List || a.expr->kind == ExprKind::Tuple);
  Value* v = nullptr;
  if (seq) {
    for (const auto& e : a.expr->args) items.push_back(Arg{e.get(), nullptr, e->loc});
  } else {
    v = L.value_of(a);
    TypeKind k = v->type().kind;
    if (k == TypeKind::List || k == TypeKind::Tuple) {
      ir::Node* n = v->node();
      if (n->prim() != Prim::ListConstruct && n->prim() != Prim::TupleConstruct)
        L.fail(a.loc, "torch.tensor() takes a list whose length is known when lowering in kiln script (written out or "
                      "built from its elements), not one built when the graph runs");
      seq = true;
      for (Value* x : n->inputs()) items.push_back(Arg{nullptr, x, a.loc});
    } else if (k != TypeKind::Int && k != TypeKind::Float && k != TypeKind::Bool) {
      L.fail(a.loc, fmt::format("torch.tensor() takes numbers or (nested) lists of them, got {}{}", v->type().str(),
                                v->type().is_tensor() ? " (torch.stack joins tensors)" : ""));
    }
  }
  if (seq) {
    if (!d.fixed && depth == d.shape.size()) d.shape.push_back(int64_t(items.size()));
    if (depth >= d.shape.size() || d.shape[depth] != int64_t(items.size()))
      L.fail(a.loc, depth >= d.shape.size()
                        ? fmt::format("torch.tensor(): expected a number at dim {} (got a sequence)", depth)
                        : fmt::format("torch.tensor(): expected sequence of length {} at dim {} (got {})", d.shape[depth], depth, items.size()));
    for (const Arg& x : items) gather_tensor_data(L, x, depth + 1, d);
    return;
  }
  if (depth != d.shape.size()) L.fail(a.loc, fmt::format("torch.tensor(): expected a sequence at dim {} (got {})", depth, v->type().str()));
  d.fixed = true;
  d.leaves.push_back(v);
}

// torch.tensor / torch.as_tensor in lowered code: numbers written out fold to a constant tensor; numbers known only
// when the graph runs are filled into one-element tensors and joined. The dtype is torch's inference (a float makes
// it the default float dtype, else an int int64, else bool) unless dtype= says.
Value* tensor_of_data(Lowerer& L, const Arg& data, const Arg& dtype) {
  TensorData d;
  gather_tensor_data(L, data, 0, d);
  bool any_float = false, any_int = false;
  for (Value* v : d.leaves) {
    any_float = any_float || v->type().kind == TypeKind::Float;
    any_int = any_int || v->type().kind == TypeKind::Int;
  }
  DType inferred = any_float || d.leaves.empty() ? default_dtype() : any_int ? DType::Int64 : DType::Bool;
  DTypeArg dt = dtype_arg(L, dtype);
  DType want = dt.known ? *dt.known : inferred;
  bool known = std::all_of(d.leaves.begin(), d.leaves.end(), [](Value* v) { return v->node()->prim() == Prim::Constant; });
  Value* out = nullptr;
  if (known) {
    std::vector<double> floats;
    std::vector<int64_t> ints;
    for (Value* v : d.leaves) {
      const Attrs& c = v->node()->attrs();
      TypeKind k = v->type().kind;
      int64_t i = k == TypeKind::Bool ? int64_t(c.b("value")) : k == TypeKind::Int ? c.i("value") : 0;
      if (any_float) floats.push_back(k == TypeKind::Float ? c.f("value") : double(i));
      else ints.push_back(i);
    }
    // the numbers in float64 or int64 first, so that each is rounded once into the dtype, as torch
    Shape flat{int64_t(d.leaves.size())};
    Tensor t = any_float || d.leaves.empty() ? tensor(floats, flat, DType::Float64) : tensor(ints, flat, DType::Int64);
    out = L.graph().insert_constant(t.to(want).reshape(d.shape).contiguous());
  } else {
    std::vector<Value*> parts;
    Value* one = L.prim(Prim::ListConstruct, {L.constant(int64_t(1))}, Type::list(kInt));
    for (Value* v : d.leaves) parts.push_back(full_of(L, Arg{nullptr, one, data.loc}, v, Arg{}, want));
    out = L.op(OpId::Cat, parts, Attrs().set("dim", int64_t(0)));
    if (d.shape.size() != 1) out = L.op(OpId::Reshape, {out}, Attrs().set("shape", d.shape));
  }
  return dt.code ? cast_to(L, out, dt) : out;
}

// The tensors of a list or tuple whose elements are known when lowering (written in the call or
// built just before it); nullopt for a List[Tensor] value built at run time.
std::optional<std::vector<Value*>> known_tensors(Lowerer& L, const Arg& a, std::string_view what) {
  if (a.expr && (a.expr->kind == ExprKind::List || a.expr->kind == ExprKind::Tuple)) {
    std::vector<Value*> xs;
    for (const auto& e : a.expr->args) xs.push_back(L.tensor_arg(Arg{e.get(), nullptr, e->loc}, what));
    if (xs.empty()) L.fail(a.loc, fmt::format("{} needs at least one tensor", what));
    return xs;
  }
  Value* v = L.value_of(a);
  ir::Node* n = v->node();
  if ((n->prim() == Prim::ListConstruct || n->prim() == Prim::TupleConstruct) && !n->inputs().empty()) {
    for (Value* x : n->inputs())
      if (!x->type().is_tensor()) L.fail(a.loc, fmt::format("{} expects tensors, got {}", what, v->type().str()));
    return n->inputs();
  }
  if (v->type().kind == TypeKind::List && v->type().elems[0].is_tensor()) return std::nullopt;
  L.fail(a.loc, fmt::format("{} expects a list or tuple of tensors, got {}", what, v->type().str()));
}

// Where an elementwise row's name is a torch name: torch.<name> and Tensor.<name> unless listed here.
unsigned elementwise_where(std::string_view name) {
  static const std::pair<const char*, unsigned> listed[] = {
      {"relu", kFn | kMethod},  // F.relu(inplace=) below
      {"tanh", kFn | kMethod | kF}, {"sigmoid", kFn | kMethod | kF},
      {"gelu", 0},       // F.gelu(approximate=) below
      {"gelu_tanh", 0},  // F.gelu(approximate='tanh')
      {"silu", 0}};  // F.silu(inplace=) below
  for (auto& [n, w] : listed)
    if (name == n) return w;
  return kFn | kMethod;
}

void add_tensor_ops(std::vector<Builtin>& b);

std::vector<Builtin> make_builtins() {
  std::vector<Builtin> b;
  auto add = [&](std::string name, unsigned where, std::vector<std::string> params, size_t required, Handler h) {
    b.push_back(Builtin{std::move(name), where, std::move(params), required, std::move(h)});
  };
  // Elementwise rows under their own names (core/ops.def): torch.<name>, Tensor.<name> and, where torch
  // has it there, F.<name>. A new row is scriptable with no entry here; only rows whose name torch does
  // not use that way are listed (elementwise_where).
  std::vector<std::pair<std::string, OpId>> unary = {
#define KILN_UNARY(Id, name, rule, expr) {#name, OpId::Id},
#include "core/ops.def"
  };
  std::vector<std::pair<std::string, OpId>> binary = {
#define KILN_BINARY(Id, name, rule, expr) {#name, OpId::Id},
#include "core/ops.def"
  };
  // torch's other spellings of the same rows
  for (auto [alias, op] : std::initializer_list<std::pair<const char*, OpId>>{{"negative", OpId::Neg}}) unary.emplace_back(alias, op);
  for (auto [alias, op] : std::initializer_list<std::pair<const char*, OpId>>{
           {"subtract", OpId::Sub}, {"multiply", OpId::Mul}, {"divide", OpId::Div}, {"true_divide", OpId::Div}})
    binary.emplace_back(alias, op);
  for (auto& [n, id] : unary) {
    OpId op = id;
    unsigned where = elementwise_where(n);
    if (where) add(n, where, {"input"}, 1, [op](Lowerer& L, Args& a, const Expr&) { return L.op(op, {L.tensor_arg(a[0], "input")}); });
  }
  add("square", kFn | kMethod, {"input"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    return L.op(OpId::Mul, {x, x});
  });
  for (auto& [n, id] : binary) {
    OpId op = id;
    if (op == OpId::Add || op == OpId::Sub) continue;
    add(n, elementwise_where(n), {"input", "other"}, 2, [op](Lowerer& L, Args& a, const Expr&) {
      Value* x = L.tensor_arg(a[0], "input", true);
      return L.op(op, {x, L.tensor_arg(a[1], "other", true)});
    });
  }
  add("remainder", kFn | kMethod, {"input", "other"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input", true);
    LoweringBuilder lb(L);
    return composite::remainder(lb, x, L.tensor_arg(a[1], "other", true));
  });
  // torch.add(x, y, alpha=a) is x + a * y (sub: x - a * y); an integer tensor takes no float alpha.
  for (auto& [n, id] : binary) {
    OpId op = id;
    if (op != OpId::Add && op != OpId::Sub) continue;
    std::string name = n;
    add(n, kFn | kMethod, {"input", "other", "alpha"}, 2, [op, name](Lowerer& L, Args& a, const Expr&) {
      Value* x = L.tensor_arg(a[0], "input", true);
      Value* y = L.tensor_arg(a[1], "other", true);
      if (a[2].present()) {
        Value* alpha = L.value_of(a[2]);
        if (!is_number(alpha->type()) || alpha->type().kind == TypeKind::Bool)
          L.fail(a[2].loc, fmt::format("{}(): alpha must be an int or a float, got {}", name, alpha->type().str()));
        y = L.op(OpId::Mul, {y, L.number_to_tensor(alpha)});
      }
      return L.op(op, {x, y});
    });
  }
  static const std::pair<const char*, OpId> reductions[] = {
#define KILN_REDUCE(Id, name, init, fold) {#name, OpId::Id},
#include "core/ops.def"
  };
  for (auto& [n, id] : reductions) {
    OpId op = id;
    add(n, kFn | kMethod, {"input", "dim", "keepdim"}, 1, [op](Lowerer& L, Args& a, const Expr&) {
      return reduce(L, op, L.tensor_arg(a[0], "input"), a[1], a[2]);
    });
  }
  add("mean", kFn | kMethod, {"input", "dim", "keepdim"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    Shape dims;
    if (a[1].present() && !(a[1].expr && a[1].expr->kind == ExprKind::None)) dims = L.need_ints(a[1], "dim");
    Value* s = reduce(L, OpId::Sum, x, a[1], a[2]);
    return L.op(OpId::Div, {s, L.number_to_tensor(count_of(L, x, dims))});
  });
  for (const char* n : {"max", "min"}) {
    bool is_max = n[1] == 'a';
    add(n, kFn | kMethod, {"input", "dim", "keepdim"}, 1, [is_max](Lowerer& L, Args& a, const Expr&) {
      Value* x = L.tensor_arg(a[0], "input");
      if (!a[1].present()) {
        if (a[2].present()) L.fail(a[2].loc, "keepdim needs dim");
        return L.op(is_max ? OpId::Amax : OpId::Amin, {x}, Attrs().set("dims", Shape{}).set("keepdim", false));
      }
      if (!L.const_int(a[1])) {
        Value* other = L.value_of(a[1]);
        if (other->type().is_tensor()) return L.op(is_max ? OpId::Maximum : OpId::Minimum, {x, other});
        L.need_int(a[1], "dim");
      }
      int64_t dim = L.need_int(a[1], "dim");
      bool kd = a[2].present() ? L.need_bool(a[2], "keepdim") : false;
      Value* v = L.op(is_max ? OpId::Amax : OpId::Amin, {x}, Attrs().set("dims", Shape{dim}).set("keepdim", kd));
      Value* i = L.op(is_max ? OpId::Argmax : OpId::Argmin, {x}, Attrs().set("dim", dim).set("keepdim", kd));
      return L.values_indices(is_max ? "max" : "min", v, i);
    });
  }
  for (const char* n : {"argmax", "argmin"}) {
    OpId op = n[3] == 'm' && n[4] == 'a' ? OpId::Argmax : OpId::Argmin;
    add(n, kFn | kMethod, {"input", "dim", "keepdim"}, 1, [op](Lowerer& L, Args& a, const Expr&) {
      Attrs at;
      if (a[1].present() && !(a[1].expr && a[1].expr->kind == ExprKind::None)) at.set("dim", L.need_int(a[1], "dim"));
      at.set("keepdim", a[2].present() ? L.need_bool(a[2], "keepdim") : false);
      return L.op(op, {L.tensor_arg(a[0], "input")}, at);
    });
  }
  for (const char* n : {"softmax", "log_softmax"}) {
    bool log = n[0] == 'l';
    add(n, kFn | kMethod | kF, {"input", "dim"}, 2, [log](Lowerer& L, Args& a, const Expr&) {
      return softmax_of(L, L.tensor_arg(a[0], "input"), L.need_int(a[1], "dim"), log);
    });
  }
  for (const char* n : {"matmul", "mm"})
    add(n, kFn | kMethod, {"input", "other"}, 2, [](Lowerer& L, Args& a, const Expr&) {
      return L.op(OpId::Matmul, {L.tensor_arg(a[0], "input"), L.tensor_arg(a[1], "other")});
    });
  add("where", kFn, {"condition", "input", "other"}, 3, [](Lowerer& L, Args& a, const Expr&) {
    Value* c = L.tensor_arg(a[0], "condition");
    return L.op(OpId::Where, {c, L.tensor_arg(a[1], "input", true), L.tensor_arg(a[2], "other", true)});
  });
  for (const char* n : {"cat", "stack"}) {
    bool stack = n[0] == 's';
    add(n, kFn, {"tensors", "dim"}, 1, [stack](Lowerer& L, Args& a, const Expr&) {
      std::string what = stack ? "torch.stack" : "torch.cat";
      if (auto xs = known_tensors(L, a[0], what)) {
        int64_t dim = a[1].present() ? L.need_int(a[1], "dim") : 0;
        if (!stack) return L.op(OpId::Cat, *xs, Attrs().set("dim", dim));
        std::vector<Value*> us;
        for (Value* x : *xs) us.push_back(L.op(OpId::Unsqueeze, {x}, Attrs().set("dim", dim)));
        return L.op(OpId::Cat, us, Attrs().set("dim", dim));
      }
      // A list built at run time (appended to in a loop): prim::cat takes it as a value.
      Value* list = L.value_of(a[0]);
      Value* dim = a[1].present() ? int_arg(L, a[1], "dim") : L.constant(int64_t(0));
      ir::Node* node = L.graph().create(Prim::ListCat, 1);
      node->add_input(list);
      node->add_input(dim);
      if (stack) node->attrs().set("stack", int64_t(1));
      node->output()->set_type(Type::tensor());
      return L.emit(node)->output();
    });
  }
  add("zeros_like", kFn, {"input"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    return filled_like(L, L.tensor_arg(a[0], "input"), L.constant(int64_t(0)));
  });
  add("ones_like", kFn, {"input"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    return filled_like(L, L.tensor_arg(a[0], "input"), L.constant(int64_t(1)));
  });
  add("full_like", kFn, {"input", "fill_value"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    Value* v = L.value_of(a[1]);
    if (!is_number(v->type())) L.fail(a[1].loc, fmt::format("fill_value expects a number, got {}", v->type().str()));
    return filled_like(L, L.tensor_arg(a[0], "input"), v);
  });
  for (const char* n : {"clamp", "clip"})
    add(n, kFn | kMethod, {"input", "min", "max"}, 1, [](Lowerer& L, Args& a, const Expr&) {
      Value* x = L.tensor_arg(a[0], "input");
      auto given = [](const Arg& g) { return g.present() && !(g.expr && g.expr->kind == ExprKind::None); };
      if (!given(a[1]) && !given(a[2])) L.fail(a[0].loc, "clamp needs min or max");
      if (given(a[1])) x = L.op(OpId::Maximum, {x, L.tensor_arg(a[1], "min", true)});
      if (given(a[2])) x = L.op(OpId::Minimum, {x, L.tensor_arg(a[2], "max", true)});
      return x;
    });
  for (const char* n : {"reshape", "view"}) {
    unsigned where = n[0] == 'r' ? unsigned(kFn | kMethod) : unsigned(kMethod);
    b.push_back(Builtin{n, where, {"input", "shape"}, 2,
                        [](Lowerer& L, Args& a, const Expr&) {
                          Value* x = L.tensor_arg(a[0], "input");
                          if (auto s = L.const_ints(a[1])) return L.op(OpId::Reshape, {x}, Attrs().set("shape", *s));
                          return L.prim(Prim::Reshape, {x, int_list(L, a[1], "shape")}, Type::tensor());
                        },
                        true});
  }
  b.push_back(Builtin{"permute", kFn | kMethod, {"input", "dims"}, 2,
                      [](Lowerer& L, Args& a, const Expr&) {
                        return L.op(OpId::Permute, {L.tensor_arg(a[0], "input")},
                                    Attrs().set("dims", L.need_ints(a[1], "dims")));
                      },
                      true});
  add("t", kFn | kMethod, {"input"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    return L.op(OpId::Permute, {L.tensor_arg(a[0], "input")}, Attrs().set("dims", Shape{1, 0}));
  });
  // torch.swapaxes / swapdims are transpose under numpy's names (maxvit's SwapAxes)
  for (auto [n, d0, d1] : {std::tuple{"transpose", "dim0", "dim1"}, std::tuple{"swapaxes", "axis0", "axis1"},
                           std::tuple{"swapdims", "dim0", "dim1"}})
    add(n, kFn | kMethod, {"input", d0, d1}, 3, [](Lowerer& L, Args& a, const Expr&) -> Value* {
      // Ranks are not known when lowering, so any transpose is prim::transpose (a permute at run time).
      Value* x = L.tensor_arg(a[0], "input");
      return L.prim(Prim::Transpose, {x, int_arg(L, a[1], "dim0"), int_arg(L, a[2], "dim1")}, Type::tensor());
    });
  add("squeeze", kFn | kMethod, {"input", "dim"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    Shape dims;
    if (a[1].present()) dims = L.need_ints(a[1], "dim");
    return L.op(OpId::Squeeze, {L.tensor_arg(a[0], "input")}, Attrs().set("dims", dims));
  });
  add("unsqueeze", kFn | kMethod, {"input", "dim"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    return L.op(OpId::Unsqueeze, {L.tensor_arg(a[0], "input")}, Attrs().set("dim", L.need_int(a[1], "dim")));
  });
  add("flatten", kFn | kMethod, {"input", "start_dim", "end_dim"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    int64_t s = a[1].present() ? L.need_int(a[1], "start_dim") : 0;
    int64_t e = a[2].present() ? L.need_int(a[2], "end_dim") : -1;
    LoweringBuilder lb(L);
    return lb.flatten(L.tensor_arg(a[0], "input"), s, e);
  });
  add("contiguous", kMethod, {"input"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    return L.op(OpId::Contiguous, {L.tensor_arg(a[0], "input")});
  });
  add("chunk", kFn | kMethod, {"input", "chunks", "dim"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    // A tuple of `chunks` slices of ceil(size / chunks) along dim. The count is fixed now and the size known
    // only when the graph runs, so a size for which torch returns fewer chunks (5 in 4: 2, 2, 1) raises then.
    Value* x = L.tensor_arg(a[0], "input");
    int64_t n = L.need_int(a[1], "chunks");
    if (n < 1 || n > 64) L.fail(a[1].loc, fmt::format("chunk expects chunks between 1 and 64, got {}", n));
    Value* dim = a[2].present() ? int_arg(L, a[2], "dim") : L.constant(int64_t(0));
    Value* size = L.prim(Prim::Size, {x, dim}, kInt);
    Value* step = L.prim(Prim::NumFloorDiv, {L.prim(Prim::NumAdd, {size, L.constant(n - 1)}, kInt), L.constant(n)}, kInt);
    L.check(L.prim(Prim::NumLt, {L.prim(Prim::NumMul, {L.constant(n - 1), step}, kInt), size}, kBool),
            fmt::format("chunk: the size along dim is too small for {} non-empty chunks (torch returns fewer, kiln "
                        "script a fixed count)",
                        n));
    std::vector<Value*> parts;
    for (int64_t k = 0; k < n; ++k) {
      Value* start = L.prim(Prim::Min, {L.prim(Prim::NumMul, {L.constant(k), step}, kInt), size}, kInt);
      Value* end = L.prim(Prim::Min, {L.prim(Prim::NumMul, {L.constant(k + 1), step}, kInt), size}, kInt);
      parts.push_back(L.prim(Prim::Slice, {x, dim, start, end, L.constant(int64_t(1))}, Type::tensor()));
    }
    return L.tuple(parts);
  });
  add("split", kFn | kMethod, {"input", "split_size_or_sections", "dim"}, 2, [](Lowerer& L, Args& a, const Expr& call) {
    // Pieces of split_size along dim (the last one shorter), or of the listed sizes. torch's count of pieces
    // follows the size, known when the graph runs; kiln's is the list's length or the number of names the
    // result is unpacked into (`q, k, v = x.split(n, dim=2)`), and a size giving another count raises then.
    Value* x = L.tensor_arg(a[0], "input");
    Value* dim = a[2].present() ? int_arg(L, a[2], "dim") : L.constant(int64_t(0));
    Value* size = L.prim(Prim::Size, {x, dim}, kInt);
    auto piece = [&](Value* start, Value* end) {
      return L.prim(Prim::Slice, {x, dim, start, end, L.constant(int64_t(1))}, Type::tensor());
    };
    std::vector<Value*> parts;
    if (a[1].expr && (a[1].expr->kind == ExprKind::List || a[1].expr->kind == ExprKind::Tuple)) {
      Value* at = L.constant(int64_t(0));
      for (const auto& e : a[1].expr->args) {
        Value* n = int_arg(L, Arg{e.get(), nullptr, e->loc}, "split_size_or_sections");
        Value* end = L.prim(Prim::NumAdd, {at, n}, kInt);
        parts.push_back(piece(at, end));
        at = end;
      }
      L.check(L.prim(Prim::NumEq, {at, size}, kBool),
              "split: the sizes of split_size_or_sections do not add up to the size along dim");
      return L.tuple(parts);
    }
    Value* step = int_arg(L, a[1], "split_size_or_sections");
    size_t count = L.unpack_count(call);
    if (!count)
      L.fail(call.loc, "split() by a size gives as many pieces as the size along dim needs, known only when the graph "
                       "runs: unpack the result into names (q, k, v = x.split(n, dim=2)) or pass the list of sizes");
    Value* pieces = L.prim(Prim::NumFloorDiv, {L.prim(Prim::NumAdd, {size, L.prim(Prim::NumSub, {step, L.constant(int64_t(1))}, kInt)}, kInt), step}, kInt);
    L.check(L.prim(Prim::NumEq, {pieces, L.constant(int64_t(count))}, kBool),
            fmt::format("split: the size along dim does not give the {} pieces the result is unpacked into", count));
    for (size_t k = 0; k < count; ++k) {
      Value* start = L.prim(Prim::NumMul, {L.constant(int64_t(k)), step}, kInt);
      Value* end = L.prim(Prim::Min, {L.prim(Prim::NumAdd, {start, step}, kInt), size}, kInt);
      parts.push_back(piece(start, end));
    }
    return L.tuple(parts);
  });
  add("clone", kFn | kMethod, {"input"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    return L.op(OpId::Clone, {L.tensor_arg(a[0], "input")});
  });
  static const std::pair<const char*, DType> casts[] = {{"float", DType::Float32}, {"double", DType::Float64},
                                                        {"long", DType::Int64},    {"int", DType::Int32},
                                                        {"bool", DType::Bool},     {"half", DType::Float16}};
  for (auto& [n, d] : casts) {
    DType dt = d;
    add(n, kMethod, {"input"}, 1, [dt](Lowerer& L, Args& a, const Expr&) {
      return L.op(OpId::Cast, {L.tensor_arg(a[0], "input")}, Attrs().set("dtype", dt));
    });
  }
  // x.to(torch.float64), x.to(y.dtype) (cast when the graph runs), x.to(y): y's dtype; x.to(device) is x, as a
  // factory's device= (a graph makes its tensors where it runs)
  add("to", kMethod, {"input", "dtype"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    if ((a[1].expr && a[1].expr->kind == ExprKind::String) || device_string(L, a[1])) return x;
    if (!(a[1].expr && torch_dtype(*a[1].expr))) {
      Value* v = L.value_of(a[1]);
      if (L.is_device(v)) return x;
      if (v->type().is_tensor()) return cast_to(L, x, DTypeArg{std::nullopt, L.dtype_value(L.prim(Prim::DTypeOf, {v}, kInt))});
      a[1] = Arg{nullptr, v, a[1].loc};
    }
    return cast_to(L, x, dtype_arg(L, a[1], "Tensor.to takes a dtype (torch.float64, x.dtype) or a tensor in kiln script"));
  });
  // torch.device('cpu') in a forward: a device value (a graph runs where its inputs are), checked as torch checks it
  add("device", kFn, {"type", "index"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    std::optional<std::string> type = L.const_str(a[0]);
    if (!type) L.fail(a[0].loc, "torch.device() takes a device string in kiln script");
    std::optional<long long> index;
    if (is_given(a[1])) index = L.need_int(a[1], "torch.device()'s index");
    DeviceSpec d = torch_device(*type, index);
    if (!d.error.empty()) L.fail(a[0].loc, "RuntimeError: " + d.error);
    return L.device_value();
  });
  add("item", kMethod, {"input"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    // The number's type follows the dtype in PyTorch, which lowering does not know: kiln gives a
    // float (int(x.item()) for an index).
    return L.prim(Prim::ToFloat, {L.tensor_arg(a[0], "input")}, kFloat);
  });
  // torch.empty is zeros: its values are unspecified in torch
  for (const char* n : {"zeros", "ones", "empty"}) {
    bool one = n[0] == 'o';
    b.push_back(Builtin{n, kFn, {"size", "dtype", "device"}, 1,
                        [one](Lowerer& L, Args& a, const Expr&) {
                          check_device(L, a[2]);
                          return full_of(L, a[0], L.constant(int64_t(one)), a[1]);
                        },
                        true});
  }
  // x.new_zeros(size) / new_ones / new_empty / new_full(size, v): x's dtype unless dtype= says otherwise (read when
  // the graph runs: swin's attention mask, x.new_zeros((pad_H, pad_W)))
  for (const char* n : {"new_zeros", "new_ones", "new_empty", "new_full"}) {
    std::string name = n;
    bool full = name == "new_full";
    std::vector<std::string> params = {"input", "size"};
    if (full) params.push_back("fill_value");
    for (const char* p : {"dtype", "device"}) params.push_back(p);
    add(n, kMethod, params, full ? 3 : 2, [name, full](Lowerer& L, Args& a, const Expr&) {
      Value* x = L.tensor_arg(a[0], "input");
      size_t at = full ? 3 : 2;
      check_device(L, a[at + 1]);
      Value* v = full ? L.value_of(a[2]) : L.constant(int64_t(name == "new_ones"));
      if (!is_number(v->type())) L.fail(a[2].loc, fmt::format("fill_value expects a number, got {}", v->type().str()));
      Arg dt = a[at];
      if (!is_given(dt)) dt = Arg{nullptr, L.dtype_value(L.prim(Prim::DTypeOf, {x}, kInt)), a[0].loc};
      return full_of(L, a[1], v, dt);
    });
    b.back().varargs = !full;  // x.new_zeros(2, 3) as x.new_zeros((2, 3))
  }
  add("arange", kFn, {"start", "end", "step", "dtype", "device"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    check_device(L, a[4]);
    // torch.arange(n) is arange(0, n)
    auto number = [&](const Arg& x, std::string_view what) {
      Value* v = L.value_of(x);
      if (v->type().kind != TypeKind::Int && v->type().kind != TypeKind::Float)
        L.fail(x.loc, fmt::format("torch.arange() expects a number for {}, got {}", what, v->type().str()));
      return v;
    };
    Value* start = a[1].present() ? number(a[0], "start") : L.constant(int64_t(0));
    Value* end = a[1].present() ? number(a[1], "end") : number(a[0], "end");
    Value* step = a[2].present() ? number(a[2], "step") : L.constant(int64_t(1));
    ir::Node* n = L.graph().create(Prim::Arange, 1);
    for (Value* v : {start, end, step}) n->add_input(v);
    if (a[3].present() && !(a[3].expr && a[3].expr->kind == ExprKind::None)) {
      std::optional<DType> d = a[3].expr ? torch_dtype(*a[3].expr) : std::nullopt;
      if (!d) L.fail(a[3].loc, "dtype must be a torch dtype such as torch.long");
      n->attrs().set("dtype", *d);
    }
    n->output()->set_type(Type::tensor());
    return L.emit(n)->output();
  });
  add("full", kFn, {"size", "fill_value", "dtype", "device"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    check_device(L, a[3]);
    Value* v = L.value_of(a[1]);
    if (!is_number(v->type())) L.fail(a[1].loc, fmt::format("fill_value expects a number, got {}", v->type().str()));
    // torch.full infers the dtype from the value when none is given
    Arg dt = a[2];
    return full_of(L, a[0], v, dt, v->type().kind == TypeKind::Int ? DType::Int64 : v->type().kind == TypeKind::Bool ? DType::Bool : DType::Float32);
  });
  add("tensor", kFn, {"data", "dtype", "device", "requires_grad"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    check_device(L, a[2]);
    if (a[3].present() && L.need_bool(a[3], "requires_grad"))
      L.fail(a[3].loc, "torch.tensor(..., requires_grad=True) is not supported in lowered code: a tensor a graph makes "
                       "is no leaf of autograd (make it a parameter, or create it outside the method)");
    return tensor_of_data(L, a[0], a[1]);
  });
  add("as_tensor", kFn, {"data", "dtype", "device"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    check_device(L, a[2]);
    // a tensor passes through (cast when dtype= says), as torch's
    if (!(a[0].expr && (a[0].expr->kind == ExprKind::List || a[0].expr->kind == ExprKind::Tuple))) {
      Value* v = L.value_of(a[0]);
      if (v->type().is_tensor()) return is_given(a[1]) ? cast_to(L, v, dtype_arg(L, a[1])) : v;
      a[0] = Arg{nullptr, v, a[0].loc};
    }
    return tensor_of_data(L, a[0], a[1]);
  });
  // torch.nn.functional
  add("gelu", kF, {"input", "approximate"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    std::string ap = "none";
    if (a[1].present()) {
      auto s = L.const_str(a[1]);
      if (!s || (*s != "none" && *s != "tanh")) L.fail(a[1].loc, "approximate must be 'none' or 'tanh'");
      ap = *s;
    }
    return L.op(ap == "tanh" ? OpId::GeluTanh : OpId::Gelu, {L.tensor_arg(a[0], "input")});
  });
  add("dropout", kF, {"input", "p", "training", "inplace"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    double p = a[1].present() ? need_float(L, a[1], "p") : 0.5;
    if (!(p >= 0 && p <= 1)) L.fail(a[1].loc, fmt::format("dropout: probability has to be between 0 and 1, but got {}", p));
    bool training = a[2].present() ? L.need_bool(a[2], "training") : true;
    return dropout_of(L, L.tensor_arg(a[0], "input"), p, training);
  });
  // The activations of eager/composites.h. inplace=True is accepted and the result is a new tensor, as in
  // eager (docs/script.md): the same values unless the function reads the input again.
  struct Activation {
    const char* name;
    std::vector<std::string> params;  // after input; "inplace" last where torch has it
    std::vector<double> defaults;     // of the number params, in order
    std::function<Value*(LoweringBuilder&, Value*, const std::vector<double>&)> lower;
  };
  const Activation activations[] = {
      {"leaky_relu", {"negative_slope", "inplace"}, {0.01}, [](auto& b, Value* x, auto& v) { return composite::leaky_relu(b, x, v[0]); }},
      {"elu", {"alpha", "inplace"}, {1.0}, [](auto& b, Value* x, auto& v) { return composite::elu(b, x, v[0]); }},
      {"selu", {"inplace"}, {}, [](auto& b, Value* x, auto&) { return composite::selu(b, x); }},
      {"celu", {"alpha", "inplace"}, {1.0}, [](auto& b, Value* x, auto& v) { return composite::celu(b, x, v[0]); }},
      {"softplus", {"beta", "threshold"}, {1.0, 20.0}, [](auto& b, Value* x, auto& v) { return composite::softplus(b, x, v[0], v[1]); }},
      {"mish", {"inplace"}, {}, [](auto& b, Value* x, auto&) { return composite::mish(b, x); }},
      {"relu", {"inplace"}, {}, [](auto& b, Value* x, auto&) { return b.op(OpId::Relu, {x}); }},
      {"silu", {"inplace"}, {}, [](auto& b, Value* x, auto&) { return b.op(OpId::Silu, {x}); }},
      {"logsigmoid", {}, {}, [](auto& b, Value* x, auto&) { return composite::logsigmoid(b, x); }},
      {"softsign", {}, {}, [](auto& b, Value* x, auto&) { return composite::softsign(b, x); }},
      {"hardtanh", {"min_val", "max_val", "inplace"}, {-1.0, 1.0},
       [](auto& b, Value* x, auto& v) { return composite::hardtanh(b, x, v[0], v[1]); }},
      {"relu6", {"inplace"}, {}, [](auto& b, Value* x, auto&) { return composite::relu6(b, x); }},
      {"hardsigmoid", {"inplace"}, {}, [](auto& b, Value* x, auto&) { return composite::hardsigmoid(b, x); }},
      {"hardswish", {"inplace"}, {}, [](auto& b, Value* x, auto&) { return composite::hardswish(b, x); }},
  };
  for (const Activation& act : activations) {
    std::vector<std::string> params = {"input"};
    params.insert(params.end(), act.params.begin(), act.params.end());
    add(act.name, kF, params, 1, [act](Lowerer& L, Args& a, const Expr&) {
      Value* x = L.tensor_arg(a[0], "input");
      std::vector<double> v = act.defaults;
      for (size_t i = 0; i < act.params.size(); ++i) {
        if (!a[i + 1].present()) continue;
        if (act.params[i] == "inplace") L.need_bool(a[i + 1], "inplace");
        else v[i] = need_float(L, a[i + 1], act.params[i]);
      }
      LoweringBuilder lb(L);
      return act.lower(lb, x, v);
    });
  }
  // output_size: an int, None or a tuple of them, constants (None keeps that dim)
  auto output_size_of = [](Lowerer& L, const Arg& a) {
    auto one = [&](const Arg& e) -> std::optional<int64_t> {
      if (e.expr && e.expr->kind == ExprKind::None) return std::nullopt;
      if (auto i = L.const_int(e)) return *i;
      L.fail(e.loc, "output_size must be an int, None or a tuple of them, constants in kiln script");
    };
    composite::OptionalSizes r;
    if (a.expr && (a.expr->kind == ExprKind::Tuple || a.expr->kind == ExprKind::List)) {
      for (const auto& e : a.expr->args) r.push_back(one(Arg{e.get(), nullptr, e->loc}));
    } else if (auto is = L.const_ints(a); is && !L.const_int(a)) {
      r.assign(is->begin(), is->end());
    } else {
      r.push_back(one(a));
    }
    return r;
  };
  add("adaptive_avg_pool2d", kF, {"input", "output_size"}, 2, [output_size_of](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    LoweringBuilder lb(L);
    return composite::adaptive_avg_pool2d(lb, x, output_size_of(L, a[1]));
  });
  add("adaptive_max_pool2d", kF, {"input", "output_size", "return_indices"}, 2, [output_size_of](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    if (a[2].present() && L.need_bool(a[2], "return_indices")) L.fail(a[2].loc, "adaptive_max_pool2d: return_indices=True is not supported");
    LoweringBuilder lb(L);
    return composite::adaptive_max_pool2d(lb, x, output_size_of(L, a[1]));
  });
  add("linear", kF, {"input", "weight", "bias"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    Value* b = a[2].present() && !(a[2].expr && a[2].expr->kind == ExprKind::None) ? L.tensor_arg(a[2], "bias") : nullptr;
    return linear_of(L, L.tensor_arg(a[0], "input"), L.tensor_arg(a[1], "weight"), b);
  });
  add("layer_norm", kFn | kF, {"input", "normalized_shape", "weight", "bias", "eps"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    // a None weight or bias, written or a module's (nanoGPT's LayerNorm with bias=False)
    auto opt = [&](const Arg& x, const char* what) -> Value* {
      if (!x.present() || (x.expr && x.expr->kind == ExprKind::None)) return nullptr;
      Value* v = L.value_of(x);
      if (v->type().kind == TypeKind::None) return nullptr;
      return L.tensor_arg(Arg{nullptr, v, x.loc}, what);
    };
    double eps = a[4].present() ? need_float(L, a[4], "eps") : 1e-5;
    return layer_norm_of(L, L.tensor_arg(a[0], "input"), L.need_ints(a[1], "normalized_shape"), opt(a[2], "weight"),
                         opt(a[3], "bias"), eps);
  });
  // torch's signatures and defaults; a None stride is the kernel (an empty one for the composite)
  auto given = [](const Arg& x) { return x.present() && !(x.expr && x.expr->kind == ExprKind::None); };
  add("interpolate", kF, {"input", "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor", "antialias"}, 1,
      [given](Lowerer& L, Args& a, const Expr&) {
        composite::InterpolateArgs ia;
        std::optional<composite::RunSize<LoweringBuilder>> run;
        if (given(a[1])) {
          if (L.const_ints(a[1])) ia.size = L.need_ints(a[1], "size");
          else run = interpolate_run_size(L, a[1]);
        }
        if (given(a[2])) {
          std::vector<double> s;
          if (auto f = L.const_float(a[2])) {
            s.push_back(*f);
          } else if (a[2].expr && (a[2].expr->kind == ExprKind::Tuple || a[2].expr->kind == ExprKind::List)) {
            for (const auto& e : a[2].expr->args) s.push_back(need_float(L, Arg{e.get(), nullptr, e->loc}, "scale_factor"));
          } else {
            L.fail(a[2].loc, "scale_factor must be a number or a tuple of numbers, each a constant, in kiln script");
          }
          ia.scale_factor = s;
        }
        if (a[3].present()) {
          std::optional<std::string> m = L.const_str(a[3]);
          if (!m) L.fail(a[3].loc, "mode must be a string constant in kiln script");
          ia.mode = *m;
        }
        if (given(a[4])) ia.align_corners = L.need_bool(a[4], "align_corners");
        if (given(a[5])) ia.recompute_scale_factor = L.need_bool(a[5], "recompute_scale_factor");
        ia.antialias = a[6].present() && L.need_bool(a[6], "antialias");
        LoweringBuilder lb(L);
        return composite::interpolate(lb, L.tensor_arg(a[0], "input"), ia, run ? &*run : nullptr);
      });
  add("scaled_dot_product_attention", kF, {"query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"}, 3,
      [given](Lowerer& L, Args& a, const Expr&) {
        double p = given(a[4]) ? need_float(L, a[4], "dropout_p") : 0.0;
        bool causal = given(a[5]) && L.need_bool(a[5], "is_causal");
        std::optional<double> scale;
        if (given(a[6])) scale = need_float(L, a[6], "scale");
        Value* mask = given(a[3]) ? L.tensor_arg(a[3], "attn_mask") : nullptr;
        LoweringBuilder lb(L);
        return composite::scaled_dot_product_attention(lb, L.tensor_arg(a[0], "query"), L.tensor_arg(a[1], "key"),
                                                       L.tensor_arg(a[2], "value"), mask, p, causal, scale);
      });
  add("dropout2d", kF, {"input", "p", "training", "inplace"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    double p = a[1].present() ? need_float(L, a[1], "p") : 0.5;
    bool training = a[2].present() ? L.need_bool(a[2], "training") : true;
    LoweringBuilder lb(L);
    return composite::dropout2d(lb, L.tensor_arg(a[0], "input"), p, training);
  });
  for (const char* n : {"pixel_shuffle", "pixel_unshuffle"}) {
    bool inverse = n[6] == 'u';
    add(n, kFn | kF, {"input", inverse ? "downscale_factor" : "upscale_factor"}, 2, [inverse](Lowerer& L, Args& a, const Expr&) {
      int64_t r = L.need_int(a[1], inverse ? "downscale_factor" : "upscale_factor");
      LoweringBuilder lb(L);
      Value* x = L.tensor_arg(a[0], "input");
      return inverse ? composite::pixel_unshuffle(lb, x, r) : composite::pixel_shuffle(lb, x, r);
    });
  }
  add("prelu", kFn | kF, {"input", "weight"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    LoweringBuilder lb(L);
    return composite::prelu(lb, L.tensor_arg(a[0], "input"), L.tensor_arg(a[1], "weight"));
  });
  add("group_norm", kFn | kF, {"input", "num_groups", "weight", "bias", "eps"}, 2, [given](Lowerer& L, Args& a, const Expr&) {
    Value* w = given(a[2]) ? L.tensor_arg(a[2], "weight") : nullptr;
    Value* bias = given(a[3]) ? L.tensor_arg(a[3], "bias") : nullptr;
    double eps = a[4].present() ? need_float(L, a[4], "eps") : 1e-5;
    LoweringBuilder lb(L);
    return composite::group_norm(lb, L.tensor_arg(a[0], "input"), L.need_int(a[1], "num_groups"), w, bias, eps);
  });
  add("instance_norm", kFn | kF,
      {"input", "running_mean", "running_var", "weight", "bias", "use_input_stats", "momentum", "eps"}, 1,
      [given](Lowerer& L, Args& a, const Expr&) {
        Value* t[4] = {};
        const char* names[] = {"running_mean", "running_var", "weight", "bias"};
        for (int i = 0; i < 4; ++i)
          if (given(a[size_t(i + 1)])) t[i] = L.tensor_arg(a[size_t(i + 1)], names[i]);
        bool use_input_stats = !a[5].present() || L.need_bool(a[5], "use_input_stats");
        double momentum = a[6].present() ? need_float(L, a[6], "momentum") : 0.1, eps = a[7].present() ? need_float(L, a[7], "eps") : 1e-5;
        LoweringBuilder lb(L);
        return composite::instance_norm(lb, L.tensor_arg(a[0], "input"), t[0], t[1], t[2], t[3], use_input_stats, momentum, eps,
                                        std::nullopt, std::nullopt);
      });
  // F.conv2d / F.conv1d: padding ints, or the string constants 'same' / 'valid' (eager/ops.h ConvPadding)
  for (const char* name : {"conv2d", "conv1d"}) {
    const bool one_d = name[4] == '1';
    add(name, kFn | kF, {"input", "weight", "bias", "stride", "padding", "dilation", "groups"}, 2,
        [given, one_d](Lowerer& L, Args& a, const Expr&) {
          Value* bias = given(a[2]) ? L.tensor_arg(a[2], "bias") : nullptr;
          auto sizes = [&](const Arg& x, const char* what, int64_t dflt) -> Shape {
            if (!x.present()) return one_d ? Shape{dflt} : Shape{dflt, dflt};
            return one_d ? Shape{L.need_ints(x, what).at(0)} : pair_of(L, x, what);
          };
          const bool str = a[4].present() && a[4].expr && a[4].expr->kind == ExprKind::String;
          ConvPadding padding = str ? ConvPadding(a[4].expr->name) : ConvPadding(sizes(a[4], "padding", 0));
          int64_t groups = a[6].present() ? L.need_int(a[6], "groups") : 1;
          Shape stride = sizes(a[3], "stride", 1), dilation = sizes(a[5], "dilation", 1);
          LoweringBuilder lb(L);
          Value* x = L.tensor_arg(a[0], "input");
          Value* w = L.tensor_arg(a[1], "weight");
          if (padding.mode == "same" && !w->type().has_static_shape()) {
            // A function's weight has no shape until the graph runs, so 'same' pads the input then by
            // composite::same_padding of the kernel size read then, and convolves with none. conv_pad_amounts with
            // any kernel raises torch's errors for the stride now.
            const char* op = one_d ? "conv1d" : "conv2d";
            composite::conv_pad_amounts([&](const std::string& m) { L.fail(L.loc(), m); }, op, padding, "zeros",
                                        Shape(stride.size(), 1), stride, dilation);
            std::vector<Value*> pads;
            for (size_t i = stride.size(); i-- > 0;) {  // F.pad's order: the last dim first
              RunInt k{&L, L.prim(Prim::Size, {w, L.constant(int64_t(2 + i))}, kInt)};
              auto [left, right] = composite::same_padding(k, dilation[i]);
              pads.push_back(left.v);
              pads.push_back(right.v);
            }
            x = pad_at_run_time(L, x, pads, "constant", 0.0);
            padding = ConvPadding("valid");
          }
          if (one_d) return composite::conv1d(lb, x, w, bias, stride[0], padding, dilation[0], groups);
          return composite::conv2d(lb, x, w, bias, stride, padding, dilation, groups);
        });
  }
  add("conv_transpose2d", kFn | kF, {"input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"}, 2,
      [given](Lowerer& L, Args& a, const Expr&) {
        Value* bias = given(a[2]) ? L.tensor_arg(a[2], "bias") : nullptr;
        auto pair_or = [&](const Arg& x, const char* what, int64_t dflt) { return x.present() ? pair_of(L, x, what) : Shape{dflt, dflt}; };
        int64_t groups = a[6].present() ? L.need_int(a[6], "groups") : 1;
        LoweringBuilder lb(L);
        return composite::conv_transpose2d(lb, L.tensor_arg(a[0], "input"), L.tensor_arg(a[1], "weight"), bias,
                                           pair_or(a[3], "stride", 1), pair_or(a[4], "padding", 0),
                                           pair_or(a[5], "output_padding", 0), groups, pair_or(a[7], "dilation", 1));
      });
  add("max_pool2d", kFn | kF, {"input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"}, 2,
      [given](Lowerer& L, Args& a, const Expr&) {
        if (given(a[6]) && L.need_bool(a[6], "return_indices")) L.fail(a[6].loc, "max_pool2d: return_indices=True is not supported");
        Shape st = given(a[2]) ? pair_of(L, a[2], "stride") : Shape{};
        Shape p = a[3].present() ? pair_of(L, a[3], "padding") : Shape{0, 0};
        Shape d = a[4].present() ? pair_of(L, a[4], "dilation") : Shape{1, 1};
        bool ceil = a[5].present() && L.need_bool(a[5], "ceil_mode");
        LoweringBuilder lb(L);
        return composite::max_pool2d(lb, L.tensor_arg(a[0], "input"), pair_of(L, a[1], "kernel_size"), st, p, d, ceil);
      });
  add("avg_pool2d", kFn | kF, {"input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"}, 2,
      [given](Lowerer& L, Args& a, const Expr&) {
        Shape st = given(a[2]) ? pair_of(L, a[2], "stride") : Shape{};
        Shape p = a[3].present() ? pair_of(L, a[3], "padding") : Shape{0, 0};
        bool ceil = a[4].present() && L.need_bool(a[4], "ceil_mode");
        bool cip = !a[5].present() || L.need_bool(a[5], "count_include_pad");
        std::optional<int64_t> div;
        if (given(a[6])) div = L.need_int(a[6], "divisor_override");
        LoweringBuilder lb(L);
        return composite::avg_pool2d(lb, L.tensor_arg(a[0], "input"), pair_of(L, a[1], "kernel_size"), st, p, ceil, cip, div);
      });
  add("size", kMethod, {"input", "dim"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    if (!a[1].present()) return L.prim(Prim::Shape, {x}, Type::list(kInt));
    Value* d = L.value_of(a[1]);
    if (d->type().kind != TypeKind::Int) L.fail(a[1].loc, fmt::format("dim expects int, got {}", d->type().str()));
    return L.prim(Prim::Size, {x, d}, kInt);
  });
  add("dim", kMethod, {"input"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    return L.prim(Prim::Len, {L.prim(Prim::Shape, {L.tensor_arg(a[0], "input")}, Type::list(kInt))}, kInt);
  });
  add("numel", kFn | kMethod, {"input"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    return count_of(L, L.tensor_arg(a[0], "input"), {});
  });
  for (const char* n : {"index_select", "gather"}) {
    OpId op = n[0] == 'i' ? OpId::IndexSelect : OpId::Gather;
    add(n, kFn | kMethod, {"input", "dim", "index"}, 3, [op](Lowerer& L, Args& a, const Expr&) {
      Value* x = L.tensor_arg(a[0], "input");
      int64_t dim = L.need_int(a[1], "dim");
      return L.op(op, {x, L.tensor_arg(a[2], "index")}, Attrs().set("dim", dim));
    });
  }
  add_tensor_ops(b);
  // Python builtins
  add("len", kPython, {"obj"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    // len(self.layers) of a ModuleList, Sequential or ModuleDict: the count __init__ left, as TorchScript reads it
    if (a[0].expr && !a[0].value)
      if (const Object* o = L.static_object(*a[0].expr);
          o && (o->layer == Layer::ModuleList || o->layer == Layer::Sequential || o->layer == Layer::ModuleDict))
        return L.constant(int64_t(o->items.size()));
    Value* v = L.value_of(a[0]);
    const Type& t = v->type();
    if (t.kind == TypeKind::Tuple) return L.constant(int64_t(t.elems.size()));
    if (t.kind != TypeKind::List && !t.is_tensor()) L.fail(a[0].loc, fmt::format("len() of {} is not supported", t.str()));
    return L.prim(Prim::Len, {v}, kInt);
  });
  // sum() of numbers: a tuple's added now, a list's in a prim::Loop (swin's `sum(shift_size) > 0`, the list
  // changed when the graph runs)
  add("sum", kPython, {"iterable", "start"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    Value* xs = L.value_of(a[0]);
    Value* acc = is_given(a[1]) ? L.value_of(a[1]) : L.constant(int64_t(0));
    const Type& t = xs->type();
    auto add_to = [&](Value* total, Value* x, SourceLoc loc) {
      if (!is_number(total->type()) || !is_number(x->type()))
        L.fail(loc, fmt::format("sum() adds numbers in kiln script, got {}", x->type().str()));
      bool f = total->type().kind == TypeKind::Float || x->type().kind == TypeKind::Float;
      return L.prim(Prim::NumAdd, {total, x}, f ? kFloat : kInt);
    };
    if (t.kind == TypeKind::Tuple) {
      for (size_t i = 0; i < t.elems.size(); ++i) {
        ir::Node* n = L.graph().create(Prim::TupleIndex, 1);
        n->add_input(xs);
        n->attrs().set("index", int64_t(i));
        n->output()->set_type(t.elems[i]);
        acc = add_to(acc, L.emit(n)->output(), a[0].loc);
      }
      return acc;
    }
    if (t.kind != TypeKind::List || !is_number(t.elems[0])) L.fail(a[0].loc, fmt::format("sum() of {} is not supported in kiln script", t.str()));
    if (t.elems[0].kind == TypeKind::Float && acc->type().kind != TypeKind::Float) acc = L.prim(Prim::ToFloat, {acc}, kFloat);
    if (t.elems[0].kind == TypeKind::Bool) L.fail(a[0].loc, "sum() of a List[bool] is not supported in kiln script");
    Type at = acc->type();
    Value* len = L.prim(Prim::Len, {xs}, kInt);
    Value* go = L.constant(true);
    ir::Node* l = L.emit(L.graph().create(Prim::Loop, 0));
    l->add_input(len);
    l->add_input(go);
    l->add_input(acc);
    ir::Block* body = l->add_block();
    Value* i = body->add_input(kInt, "i");
    Value* carried = body->add_input(at, "total");
    {
      ir::InsertPointGuard guard(L.graph());
      L.graph().set_insert_point(body);
      Value* x = L.prim(Prim::ListIndex, {xs, i}, t.elems[0]);
      body->register_output(L.constant(true));
      body->register_output(L.prim(Prim::NumAdd, {carried, x}, at));
    }
    return l->add_output(at);
  });
  static const std::pair<const char*, Prim> convs[] = {{"int", Prim::ToInt}, {"float", Prim::ToFloat}, {"bool", Prim::ToBool}};
  for (auto& [n, p] : convs) {
    Prim pr = p;
    Type out = pr == Prim::ToInt ? kInt : pr == Prim::ToFloat ? kFloat : kBool;
    std::string name = n;
    add(n, kPython, {"x"}, 1, [pr, out, name](Lowerer& L, Args& a, const Expr&) {
      // float('-inf'), float('inf'), float('nan'): Python's spellings of the special values
      if (pr == Prim::ToFloat && a[0].expr && a[0].expr->kind == ExprKind::String) {
        std::string s = a[0].expr->name;
        std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        if (s == "inf" || s == "+inf" || s == "infinity") return L.constant(double(INFINITY));
        if (s == "-inf" || s == "-infinity") return L.constant(-double(INFINITY));
        if (s == "nan") return L.constant(double(NAN));
        L.fail(a[0].loc, fmt::format("float() of the string '{}' is not supported in kiln script (inf, -inf and nan are)", a[0].expr->name));
      }
      Value* v = L.value_of(a[0]);
      if (!v->type().is_tensor() && !is_number(v->type()))
        L.fail(a[0].loc, fmt::format("{}() of {} is not supported", name, v->type().str()));
      if (same_type(v->type(), out)) return v;
      return L.prim(pr, {v}, out);
    });
  }
  for (const char* n : {"min", "max"}) {
    Prim p = n[1] == 'a' ? Prim::Max : Prim::Min;
    add(n, kPython, {"a", "b"}, 2, [p](Lowerer& L, Args& a, const Expr&) {
      Value* x = L.value_of(a[0]);
      Value* y = L.value_of(a[1]);
      if (!is_number(x->type()) || !is_number(y->type()))
        L.fail(a[0].loc, fmt::format("min()/max() take two numbers in kiln script (got {} and {}); use torch.maximum for tensors",
                                     x->type().str(), y->type().str()));
      bool f = x->type().kind == TypeKind::Float || y->type().kind == TypeKind::Float;
      return L.prim(p, {x, y}, f ? kFloat : kInt);
    });
  }
  // The loss functions (eager/composite_losses.h), with torch's parameters; the deprecated size_average
  // and reduce must be left unset.
  struct LossArgs {
    Lowerer& L;
    Args& a;
    const std::vector<std::string>& params;
    const Arg& at(const char* name) {
      return a[size_t(std::find(params.begin(), params.end(), name) - params.begin())];
    }
    bool given(const char* name) {
      const Arg& x = at(name);
      return x.present() && !(x.expr && x.expr->kind == ExprKind::None);
    }
    Value* tensor(const char* name) { return given(name) ? L.tensor_arg(at(name), name) : nullptr; }
    double number(const char* name, double def) { return given(name) ? need_float(L, at(name), name) : def; }
    composite::Reduction reduction(const char* op, bool batchmean = false) {
      for (const char* old : {"size_average", "reduce"})
        if (std::count(params.begin(), params.end(), old) && given(old))
          L.fail(at(old).loc, fmt::format("{}: {} is deprecated; use reduction", op, old));
      std::string r = "mean";
      if (given("reduction")) {
        auto s = L.const_str(at("reduction"));
        if (!s) L.fail(at("reduction").loc, fmt::format("{}: reduction must be a string constant in kiln script", op));
        r = *s;
      }
      LoweringBuilder lb(L);
      return composite::reduction_of(lb, op, r, batchmean);
    }
  };
  using LossLowering = std::function<Value*(LoweringBuilder&, Value*, Value*, LossArgs&)>;
  auto add_loss = [&](const char* name, std::vector<std::string> params, LossLowering lower) {
    params.insert(params.begin(), {"input", "target"});
    add(name, kF, params, 2, [params, lower](Lowerer& L, Args& a, const Expr&) {
      LossArgs la{L, a, params};
      Value* x = L.tensor_arg(a[0], "input");
      Value* t = L.tensor_arg(a[1], "target");
      LoweringBuilder lb(L);
      return lower(lb, x, t, la);
    });
  };
  add_loss("cross_entropy", {"weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"},
           [](LoweringBuilder& b, Value* x, Value* t, LossArgs& la) {
             int64_t ignore = la.given("ignore_index") ? la.L.need_int(la.at("ignore_index"), "ignore_index") : -100;
             return composite::cross_entropy(b, x, t, la.tensor("weight"), ignore, la.reduction("cross_entropy"),
                                             la.number("label_smoothing", 0.0));
           });
  add_loss("nll_loss", {"weight", "size_average", "ignore_index", "reduce", "reduction"},
           [](LoweringBuilder& b, Value* x, Value* t, LossArgs& la) {
             int64_t ignore = la.given("ignore_index") ? la.L.need_int(la.at("ignore_index"), "ignore_index") : -100;
             return composite::nll_loss(b, x, t, la.tensor("weight"), ignore, la.reduction("nll_loss"));
           });
  add_loss("mse_loss", {"size_average", "reduce", "reduction"}, [](LoweringBuilder& b, Value* x, Value* t, LossArgs& la) {
    return composite::mse_loss(b, x, t, la.reduction("mse_loss"));
  });
  add_loss("l1_loss", {"size_average", "reduce", "reduction"}, [](LoweringBuilder& b, Value* x, Value* t, LossArgs& la) {
    return composite::l1_loss(b, x, t, la.reduction("l1_loss"));
  });
  add_loss("smooth_l1_loss", {"size_average", "reduce", "reduction", "beta"}, [](LoweringBuilder& b, Value* x, Value* t, LossArgs& la) {
    return composite::smooth_l1_loss(b, x, t, la.reduction("smooth_l1_loss"), la.number("beta", 1.0));
  });
  add_loss("huber_loss", {"reduction", "delta"}, [](LoweringBuilder& b, Value* x, Value* t, LossArgs& la) {
    return composite::huber_loss(b, x, t, la.reduction("huber_loss"), la.number("delta", 1.0));
  });
  add_loss("binary_cross_entropy", {"weight", "size_average", "reduce", "reduction"},
           [](LoweringBuilder& b, Value* x, Value* t, LossArgs& la) {
             return composite::binary_cross_entropy(b, x, t, la.tensor("weight"), la.reduction("binary_cross_entropy"));
           });
  add_loss("binary_cross_entropy_with_logits", {"weight", "size_average", "reduce", "reduction", "pos_weight"},
           [](LoweringBuilder& b, Value* x, Value* t, LossArgs& la) {
             return composite::binary_cross_entropy_with_logits(b, x, t, la.tensor("weight"), la.tensor("pos_weight"),
                                                                la.reduction("binary_cross_entropy_with_logits"));
           });
  add_loss("kl_div", {"size_average", "reduce", "reduction", "log_target"}, [](LoweringBuilder& b, Value* x, Value* t, LossArgs& la) {
    bool log_target = la.given("log_target") && la.L.need_bool(la.at("log_target"), "log_target");
    return composite::kl_div(b, x, t, la.reduction("kl_div", true), log_target);
  });
  add("abs", kPython, {"x"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.value_of(a[0]);
    if (x->type().is_tensor()) return L.op(OpId::Abs, {x});
    if (x->type().kind != TypeKind::Int && x->type().kind != TypeKind::Float)
      L.fail(a[0].loc, fmt::format("abs() of {} is not supported", x->type().str()));
    Value* zero = x->type().kind == TypeKind::Int ? L.constant(int64_t(0)) : L.constant(0.0);
    Value* neg = L.prim(Prim::NumLt, {x, zero}, kBool);
    return L.if_value(neg, [&] { return L.prim(Prim::NumNeg, {x}, x->type()); }, [&] { return x; }, L.loc());
  });
  return b;
}

const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> all = make_builtins();
  return all;
}


// ---- tensor ops (eager/composites_tensor_ops.h) ----


// x broadcast to a shape known at run time: where(full(shape, True), x, x) takes x's dtype and sums the
// gradient back over the broadcast dims, as expand's does. A -1 keeps x's size there (counted from the end).
Value* expand_to(Lowerer& L, Value* x, Value* shape) {
  ir::Node* ln = shape->node();
  if (ln->prim() == Prim::ListConstruct) {
    const int64_t m = int64_t(ln->inputs().size());
    std::vector<Value*> es;
    for (int64_t i = 0; i < m; ++i) {
      Value* s = ln->input(size_t(i));
      es.push_back(L.if_value(L.prim(Prim::NumEq, {s, L.constant(int64_t(-1))}, kBool),
                              [&] { return L.prim(Prim::Size, {x, L.constant(i - m)}, kInt); }, [&] { return s; }, L.loc()));
    }
    shape = L.prim(Prim::ListConstruct, es, Type::list(kInt));
  }
  ir::Node* n = L.graph().create(Prim::Full, 1);
  n->add_input(shape);
  n->add_input(L.constant(true));
  n->attrs().set("dtype", DType::Bool);
  n->output()->set_type(Type::tensor());
  Value* all = L.emit(n)->output();
  return L.op(OpId::Where, {all, x, x});
}

// Tensor.repeat: x with leading 1s up to len(repeats) dims (its shape read when the graph runs), repeated
Value* repeat_of(Lowerer& L, Value* x, const Shape& r) {
  const int64_t m = int64_t(r.size());
  Type li = Type::list(kInt);
  Value* shape = L.prim(Prim::Shape, {x}, li);
  L.check(L.prim(Prim::NumLe, {L.prim(Prim::Len, {shape}, kInt), L.constant(m)}, kBool),
          fmt::format("repeat: number of dimensions of repeat dims can not be smaller than number of dimensions of tensor "
                      "({} repeats)", m));
  std::vector<Value*> ones(size_t(m), L.constant(int64_t(1)));
  Value* padded = L.prim(Prim::ListAdd, {L.prim(Prim::ListConstruct, ones, li), shape}, li);
  padded = L.prim(Prim::ListSlice, {padded, L.constant(-m), L.constant(int64_t(INT64_MAX))}, li);
  LoweringBuilder lb(L);
  return composite::repeat(lb, L.prim(Prim::Reshape, {x, padded}, Type::tensor()), r);
}

void add_tensor_ops(std::vector<Builtin>& b) {
  auto add = [&](std::string name, unsigned where, std::vector<std::string> params, size_t required, Handler h) {
    b.push_back(Builtin{std::move(name), where, std::move(params), required, std::move(h)});
  };
  add("masked_fill", kFn | kMethod, {"input", "mask", "value"}, 3, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    Value* mask = L.tensor_arg(a[1], "mask");
    LoweringBuilder lb(L);
    return composite::masked_fill(lb, x, mask, L.tensor_arg(a[2], "value", true));
  });
  for (const char* n : {"tril", "triu"}) {
    bool upper = n[3] == 'u';
    add(n, kFn | kMethod, {"input", "diagonal"}, 1, [upper](Lowerer& L, Args& a, const Expr&) {
      int64_t k = is_given(a[1]) ? L.need_int(a[1], "diagonal") : 0;
      LoweringBuilder lb(L);
      return composite::triangle(lb, L.tensor_arg(a[0], "input"), k, upper);
    });
  }
  add("topk", kFn | kMethod, {"input", "k", "dim", "largest", "sorted"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    int64_t dim = is_given(a[2]) ? L.need_int(a[2], "dim") : -1;
    bool largest = is_given(a[3]) ? L.need_bool(a[3], "largest") : true;
    if (is_given(a[4])) L.need_bool(a[4], "sorted");  // kiln always returns them sorted, which torch allows
    LoweringBuilder lb(L);
    if (std::optional<int64_t> k = L.const_int(a[1])) {
      auto [v, i] = composite::topk(lb, x, *k, dim, largest);
      return L.values_indices("topk", v, i);
    }
    // k computed when the graph runs (min(top_k, logits.size(-1))): the slice's end is that int
    Value* k = int_arg(L, a[1], "k");
    L.check(L.prim(Prim::NumGe, {k, L.constant(int64_t(0))}, kBool), "topk: selected index k out of range: k is negative");
    L.check(L.prim(Prim::NumLe, {k, L.prim(Prim::Size, {x, L.constant(dim)}, kInt)}, kBool),
            "topk: selected index k out of range: k is larger than the size of dim");
    Value* order = composite::argsort(lb, x, dim, largest);
    Value* idx = L.prim(Prim::Slice, {order, L.constant(dim), L.constant(int64_t(0)), k, L.constant(int64_t(1))}, Type::tensor());
    return L.values_indices("topk", L.op(OpId::Gather, {x, idx}, Attrs().set("dim", dim)), idx);
  });
  add("sort", kFn | kMethod, {"input", "dim", "descending", "stable"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    int64_t dim = is_given(a[1]) ? L.need_int(a[1], "dim") : -1;
    bool desc = is_given(a[2]) ? L.need_bool(a[2], "descending") : false;
    if (is_given(a[3])) L.need_bool(a[3], "stable");  // kiln's sort is always stable
    LoweringBuilder lb(L);
    auto [v, i] = composite::sort(lb, L.tensor_arg(a[0], "input"), dim, desc);
    return L.values_indices("sort", v, i);
  });
  // torch.median / kthvalue: eager's composites (eager/composites_tensor_ops.h); a k computed when the graph runs
  // (min(k, x.size(-1))) is checked here, after the composite's check of an empty dim
  add("median", kFn | kMethod, {"input", "dim", "keepdim"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    LoweringBuilder lb(L);
    if (!is_given(a[1])) {
      if (is_given(a[2])) L.fail(a[2].loc, "median: keepdim needs dim");
      return composite::median_all(lb, x);
    }
    auto [v, i] = composite::median(lb, x, L.need_int(a[1], "dim"), is_given(a[2]) && L.need_bool(a[2], "keepdim"));
    return L.values_indices("median", v, i);
  });
  add("kthvalue", kFn | kMethod, {"input", "k", "dim", "keepdim"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    int64_t dim = is_given(a[2]) ? L.need_int(a[2], "dim") : -1;
    bool keepdim = is_given(a[3]) && L.need_bool(a[3], "keepdim");
    LoweringBuilder lb(L);
    if (std::optional<int64_t> k = L.const_int(a[1])) {
      auto [v, i] = composite::kthvalue(lb, x, *k, dim, keepdim);
      return L.values_indices("kthvalue", v, i);
    }
    Value* k = int_arg(L, a[1], "k");
    const int64_t d = lb.dim("kthvalue", dim, x);
    Value* n = L.prim(Prim::Size, {x, L.constant(d)}, kInt);
    composite::reduction_size(lb, "kthvalue", x, d);
    L.check(L.prim(Prim::NumGe, {k, L.constant(int64_t(1))}, kBool), composite::kth_out_of_range(d));
    L.check(L.prim(Prim::NumLe, {k, n}, kBool), composite::kth_out_of_range(d));
    auto [v, i] = composite::kth_sorted(lb, x, d, L.number_to_tensor(k), keepdim);
    return L.values_indices("kthvalue", v, i);
  });
  // Tensor.index_put((i0, i1, ...), v, accumulate) and, through the in-place rule, index_put_: integer indices over
  // the leading dims lower to eager's composite; a bool mask among them stands for as many index tensors as it has
  // dims, which a script learns only when it runs, so an index that is or may be one makes a prim::index_put, which
  // runs eager's index_put then
  add("index_put", kFn | kMethod, {"input", "indices", "values", "accumulate"}, 3, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    std::optional<std::vector<Value*>> idx = known_tensors(L, a[1], "index_put");
    if (!idx || idx->empty()) L.fail(a[1].loc, "index_put: kiln script takes indices as a tuple or list of index tensors, (i0, i1, ...)");
    Value* v = L.tensor_arg(a[2], "values", true);
    bool accumulate = is_given(a[3]) && L.need_bool(a[3], "accumulate");
    if (std::any_of(idx->begin(), idx->end(), [](Value* i) { return !i->type().dtype || *i->type().dtype == DType::Bool; })) {
      std::vector<Value*> in = {x, v};
      in.insert(in.end(), idx->begin(), idx->end());
      Value* y = L.prim(Prim::IndexPut, in, Type::tensor());
      y->node()->attrs().set("accumulate", int64_t(accumulate));
      return y;
    }
    LoweringBuilder lb(L);
    return composite::index_put_tuple(lb, x, *idx, v, accumulate);
  });
  add("argsort", kFn | kMethod, {"input", "dim", "descending", "stable"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    int64_t dim = is_given(a[1]) ? L.need_int(a[1], "dim") : -1;
    bool desc = is_given(a[2]) ? L.need_bool(a[2], "descending") : false;
    if (is_given(a[3])) L.need_bool(a[3], "stable");
    LoweringBuilder lb(L);
    return composite::argsort(lb, L.tensor_arg(a[0], "input"), dim, desc);
  });
  add("multinomial", kFn | kMethod, {"input", "num_samples", "replacement", "generator"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    if (is_given(a[3])) L.fail(a[3].loc, "multinomial: generator= is not supported in kiln script (kiln's generator is used)");
    int64_t n = L.need_int(a[1], "num_samples");
    bool repl = is_given(a[2]) ? L.need_bool(a[2], "replacement") : false;
    LoweringBuilder lb(L);
    return composite::multinomial(lb, L.tensor_arg(a[0], "input"), n, repl);
  });
  b.push_back(Builtin{"expand", kMethod, {"input", "size"}, 2,
                      [](Lowerer& L, Args& a, const Expr&) {
                        Value* x = L.tensor_arg(a[0], "input");
                        if (auto s = L.const_ints(a[1])) return L.op(OpId::Expand, {x}, Attrs().set("shape", *s));
                        return expand_to(L, x, int_list(L, a[1], "size"));
                      },
                      true});
  add("expand_as", kMethod, {"input", "other"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    Value* x = L.tensor_arg(a[0], "input");
    return expand_to(L, x, L.prim(Prim::Shape, {L.tensor_arg(a[1], "other")}, Type::list(kInt)));
  });
  b.push_back(Builtin{"repeat", kMethod, {"input", "repeats"}, 2,
                      [](Lowerer& L, Args& a, const Expr&) {
                        return repeat_of(L, L.tensor_arg(a[0], "input"), L.need_ints(a[1], "repeats"));
                      },
                      true});
  // torch.einsum(eq, a, b, ...) or torch.einsum(eq, [a, b, ...]): up to eight operands written out
  add("einsum", kFn, {"equation", "operand0", "operand1", "operand2", "operand3", "operand4", "operand5", "operand6", "operand7"}, 2,
      [](Lowerer& L, Args& a, const Expr&) {
    if (!a[0].expr || a[0].expr->kind != ExprKind::String) L.fail(a[0].loc, "einsum: the equation must be a string constant");
    std::vector<Value*> ops;
    if (!a[2].present() && a[1].expr && (a[1].expr->kind == ExprKind::List || a[1].expr->kind == ExprKind::Tuple)) {
      ops = *known_tensors(L, a[1], "einsum");
    } else {
      for (size_t k = 1; k < a.size() && a[k].present(); ++k) ops.push_back(L.tensor_arg(a[k], "operand"));
    }
    LoweringBuilder lb(L);
    const std::string& equation = a[0].expr->name;
    if (std::optional<Value*> y = composite::einsum_lowered(lb, equation, ops)) return *y;
    // a '...' that needs the ranks: its letters checked now, the rest by eager's einsum when the graph runs
    composite::einsum_check_letters(lb, equation, ops);
    Value* y = L.prim(Prim::Einsum, ops, Type::tensor());
    y->node()->attrs().set("equation", equation);
    return y;
  });
  add("cumsum", kFn | kMethod, {"input", "dim", "dtype"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    if (is_given(a[2])) L.fail(a[2].loc, "cumsum: dtype= is not supported in kiln script; cast the input");
    LoweringBuilder lb(L);
    return composite::cumsum(lb, L.tensor_arg(a[0], "input"), L.need_int(a[1], "dim"));
  });
  add("cumprod", kFn | kMethod, {"input", "dim", "dtype"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    if (is_given(a[2])) L.fail(a[2].loc, "cumprod: dtype= is not supported in kiln script; cast the input");
    LoweringBuilder lb(L);
    return composite::cumprod(lb, L.tensor_arg(a[0], "input"), L.need_int(a[1], "dim"));
  });
  b.push_back(Builtin{"flip", kFn | kMethod, {"input", "dims"}, 2,
                      [](Lowerer& L, Args& a, const Expr&) {
                        LoweringBuilder lb(L);
                        return composite::flip(lb, L.tensor_arg(a[0], "input"), L.need_ints(a[1], "dims"));
                      },
                      true});
  add("roll", kFn | kMethod, {"input", "shifts", "dims"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    Shape dims = is_given(a[2]) ? L.need_ints(a[2], "dims") : Shape{};
    Value* x = L.tensor_arg(a[0], "input");
    if (L.const_ints(a[1]) || dims.empty()) {
      LoweringBuilder lb(L);
      return composite::roll(lb, x, L.need_ints(a[1], "shifts"), dims);
    }
    // shifts computed when the graph runs (swin's cyclic shift): per dim, the last (shift mod size) entries
    // moved to the front, two prim::slice views concatenated
    std::vector<Value*> shifts = ints_of_sequence(L, a[1], "shifts");
    if (shifts.size() != dims.size())
      L.fail(a[1].loc, fmt::format("roll: shifts and dimensions must align. shifts: {}, dims: {}", shifts.size(), dims.size()));
    Value* y = x;
    for (size_t k = 0; k < dims.size(); ++k) {
      Value* d = L.constant(dims[k]);
      Value* n = L.prim(Prim::Size, {y, d}, kInt);
      // Python's % takes the divisor's sign; an empty dim rolls to itself
      Value* r = L.if_value(L.prim(Prim::NumGt, {n, L.constant(int64_t(0))}, kBool),
                            [&] { return L.prim(Prim::NumMod, {shifts[k], n}, kInt); },
                            [&] { return L.constant(int64_t(0)); }, a[1].loc);
      Value* cut = L.prim(Prim::NumSub, {n, r}, kInt);
      Value* one = L.constant(int64_t(1));
      Value* none = L.graph().insert_none();
      Value* tail = L.prim(Prim::Slice, {y, d, cut, none, one}, Type::tensor());
      Value* head = L.prim(Prim::Slice, {y, d, L.constant(int64_t(0)), cut, one}, Type::tensor());
      y = L.prim(Prim::ListCat, {L.prim(Prim::ListConstruct, {tail, head}, Type::list(Type::tensor())), d}, Type::tensor());
    }
    return y;
  });
  add("repeat_interleave", kFn | kMethod, {"input", "repeats", "dim", "output_size"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    std::optional<int64_t> r = L.const_int(a[1]);
    if (!r) L.fail(a[1].loc, "repeat_interleave: repeats must be an int constant in kiln script (a tensor of counts is not supported)");
    std::optional<int64_t> dim;
    if (is_given(a[2])) dim = L.need_int(a[2], "dim");
    LoweringBuilder lb(L);
    return composite::repeat_interleave(lb, L.tensor_arg(a[0], "input"), *r, dim);
  });
  add("one_hot", kF, {"tensor", "num_classes"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    int64_t n = is_given(a[1]) ? L.need_int(a[1], "num_classes") : -1;
    LoweringBuilder lb(L);
    Value* x = L.tensor_arg(a[0], "tensor");
    if (n != -1) return composite::one_hot(lb, x, n);
    // num_classes -1 or left out: the input's max + 1, read when the graph runs (torch's rule and errors)
    Value* numel = L.prim(Prim::Size, {L.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{-1})), L.constant(int64_t(0))}, kInt);
    L.check(L.prim(Prim::NumGt, {numel, L.constant(int64_t(0))}, kBool),
            "one_hot: can not infer the total number of classes from an empty tensor");
    auto extreme = [&](OpId op) {
      return L.prim(Prim::ToInt, {L.op(op, {x}, Attrs().set("dims", Shape{}).set("keepdim", false))}, kInt);
    };
    L.check(L.prim(Prim::NumGe, {extreme(OpId::Amin), L.constant(int64_t(0))}, kBool), "one_hot: class values must be non-negative");
    return composite::one_hot_of(lb, x, arange_of(L, L.prim(Prim::NumAdd, {extreme(OpId::Amax), L.constant(int64_t(1))}, kInt), DType::Int64));
  });
  add("pad", kF, {"input", "pad", "mode", "value"}, 2, [](Lowerer& L, Args& a, const Expr&) {
    std::string mode = "constant";
    if (is_given(a[2])) {
      if (!a[2].expr || a[2].expr->kind != ExprKind::String) L.fail(a[2].loc, "pad: mode must be a string constant");
      mode = a[2].expr->name;
    }
    double v = is_given(a[3]) ? need_float(L, a[3], "value") : 0.0;
    Value* x = L.tensor_arg(a[0], "input");
    if (L.const_ints(a[1])) {
      LoweringBuilder lb(L);
      return composite::pad(lb, x, L.need_ints(a[1], "pad"), mode, v);
    }
    if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular")
      L.fail(a[2].loc, fmt::format("pad: mode '{}' is not supported (kiln has 'constant', 'reflect', 'replicate' and 'circular')", mode));
    return pad_at_run_time(L, x, ints_of_sequence(L, a[1], "pad"), mode, v);
  });
  add("embedding_bag", kF,
      {"input", "weight", "offsets", "max_norm", "norm_type", "scale_grad_by_freq", "mode", "sparse", "per_sample_weights",
       "include_last_offset", "padding_idx"},
      2, [](Lowerer& L, Args& a, const Expr&) {
        if (is_given(a[3])) L.fail(a[3].loc, "embedding_bag: max_norm is not supported");
        if (is_given(a[5]) && L.need_bool(a[5], "scale_grad_by_freq")) L.fail(a[5].loc, "embedding_bag: scale_grad_by_freq is not supported");
        std::string mode = "mean";
        if (is_given(a[6])) {
          if (!a[6].expr || a[6].expr->kind != ExprKind::String) L.fail(a[6].loc, "embedding_bag: mode must be a string constant");
          mode = a[6].expr->name;
        }
        Value* offsets = is_given(a[2]) ? L.tensor_arg(a[2], "offsets") : nullptr;
        Value* psw = is_given(a[8]) ? L.tensor_arg(a[8], "per_sample_weights") : nullptr;
        bool last = is_given(a[9]) && L.need_bool(a[9], "include_last_offset");
        std::optional<int64_t> pad;
        if (is_given(a[10])) pad = L.need_int(a[10], "padding_idx");
        if (pad && *pad < 0) L.fail(a[10].loc, "embedding_bag: a negative padding_idx needs the weight's size; give it from 0");
        LoweringBuilder lb(L);
        return composite::embedding_bag(lb, L.tensor_arg(a[1], "weight"), L.tensor_arg(a[0], "input"), offsets, mode, psw, last, pad);
      });
  // F.embedding and F.batch_norm: the composites nn.Embedding and nn.BatchNorm run, on the tensors given
  add("embedding", kF, {"input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"}, 2,
      [](Lowerer& L, Args& a, const Expr&) {
        if (is_given(a[6]) && L.need_bool(a[6], "sparse"))
          L.fail(a[6].loc, "embedding: sparse=True is not supported: kiln's gradients are dense (sparse=False gives the same values)");
        bool by_freq = is_given(a[5]) && L.need_bool(a[5], "scale_grad_by_freq");
        std::optional<int64_t> pad;
        if (is_given(a[2])) {
          pad = L.need_int(a[2], "padding_idx");
          std::optional<Tensor> w = module_tensor(L, a[1]);
          if (w && w->dim() == 2 && (*pad >= w->size(0) || *pad < -w->size(0)))
            L.fail(a[2].loc, fmt::format("embedding: padding_idx {} is not within num_embeddings ({})", *pad, w->size(0)));
          if (*pad < 0 && !w) L.fail(a[2].loc, "embedding: a negative padding_idx needs the weight's size: give it from 0, or pass a module's weight");
          if (*pad < 0) *pad += w->size(0);
        }
        LoweringBuilder lb(L);
        Value* indices = L.tensor_arg(a[0], "input");
        Value* weight = nullptr;
        if (is_given(a[3])) {
          // max_norm renormalises the weight's rows in place: the graph writes it back, as nn.Embedding's
          double max_norm = need_float(L, a[3], "max_norm");
          if (!(max_norm > 0)) L.fail(a[3].loc, fmt::format("embedding: max_norm must be positive, got {}", max_norm));
          std::optional<Tensor> w = module_tensor(L, a[1]);
          if (!w) L.fail(a[1].loc, "embedding: with max_norm the weight is renormalised in place, so it must be a module's parameter (self.<name>) in kiln script");
          weight = composite::embedding_renorm(lb, lb.parameter(*w, a[1].expr ? describe_attribute(*a[1].expr) : "weight"), indices, max_norm,
                                               is_given(a[4]) ? need_float(L, a[4], "norm_type") : 2.0);
        } else {
          weight = L.tensor_arg(a[1], "weight");
        }
        return composite::embedding(lb, weight, indices, pad, by_freq);
      });
  add("batch_norm", kF, {"input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"}, 3,
      [](Lowerer& L, Args& a, const Expr&) {
        bool training = is_given(a[5]) && L.need_bool(a[5], "training");
        double momentum = is_given(a[6]) ? need_float(L, a[6], "momentum") : 0.1, eps = is_given(a[7]) ? need_float(L, a[7], "eps") : 1e-5;
        LoweringBuilder lb(L);
        // in training the running statistics are updated in place: they must be buffers of a module, which the
        // graph writes back after each call as nn.BatchNorm's
        auto stat = [&](const Arg& x, const char* what) -> Value* {
          if (!is_given(x)) return nullptr;
          if (!training) return L.tensor_arg(x, what);
          std::optional<Tensor> t = module_tensor(L, x);
          if (!t) L.fail(x.loc, fmt::format("batch_norm: in training, {} is updated in place, so it must be a module's buffer (self.<name>) in kiln script", what));
          return lb.parameter(*t, x.expr ? describe_attribute(*x.expr) : what);
        };
        Value* rm = stat(a[1], "running_mean");
        Value* rv = stat(a[2], "running_var");
        Value* w = is_given(a[3]) ? L.tensor_arg(a[3], "weight") : nullptr;
        Value* bias = is_given(a[4]) ? L.tensor_arg(a[4], "bias") : nullptr;
        return composite::batch_norm(lb, L.tensor_arg(a[0], "input"), rm, rv, w, bias, training, momentum, eps);
      });
  add("normalize", kF, {"input", "p", "dim", "eps"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    double p = is_given(a[1]) ? need_float(L, a[1], "p") : 2.0;
    int64_t dim = is_given(a[2]) ? L.need_int(a[2], "dim") : 1;
    double eps = is_given(a[3]) ? need_float(L, a[3], "eps") : 1e-12;
    LoweringBuilder lb(L);
    return composite::normalize(lb, L.tensor_arg(a[0], "input"), p, dim, eps);
  });
  auto norm_handler = [](bool torch_norm) {
    return [torch_norm](Lowerer& L, Args& a, const Expr&) {
      double p = 2.0;
      if (is_given(a[1])) {
        if (a[1].expr && a[1].expr->kind == ExprKind::String) {
          if (a[1].expr->name != "fro") L.fail(a[1].loc, fmt::format("norm: p='{}' is not supported (numbers and 'fro' are)", a[1].expr->name));
        } else {
          p = need_float(L, a[1], "ord");
        }
      }
      Shape dims = is_given(a[2]) ? L.need_ints(a[2], "dim") : Shape{};
      bool kd = is_given(a[3]) ? L.need_bool(a[3], "keepdim") : false;
      (void)torch_norm;
      LoweringBuilder lb(L);
      return composite::vector_norm(lb, L.tensor_arg(a[0], "input"), p, dims, kd);
    };
  };
  add("norm", kFn | kMethod, {"input", "p", "dim", "keepdim"}, 1, norm_handler(true));
  add("linalg.vector_norm", kFn, {"x", "ord", "dim", "keepdim"}, 1, norm_handler(false));
  for (const char* n : {"addmm", "baddbmm"}) {
    add(n, kFn | kMethod, {"input", n[0] == 'a' ? "mat1" : "batch1", n[0] == 'a' ? "mat2" : "batch2", "beta", "alpha"}, 3,
        [](Lowerer& L, Args& a, const Expr&) {
          double beta = is_given(a[3]) ? need_float(L, a[3], "beta") : 1.0;
          double alpha = is_given(a[4]) ? need_float(L, a[4], "alpha") : 1.0;
          LoweringBuilder lb(L);
          return composite::addmm(lb, L.tensor_arg(a[0], "input"), L.tensor_arg(a[1], "mat1"), L.tensor_arg(a[2], "mat2"), beta, alpha);
        });
  }
  // torch.bernoulli(probs), torch.bernoulli(x, p) / x.bernoulli(p) (p a number or a tensor: draws of x's shape and
  // dtype); x.bernoulli_(p) through the in-place methods, its default p=0.5 in inplace.cpp
  add("bernoulli", kFn | kMethod, {"input", "p", "generator"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    if (is_given(a[2])) L.fail(a[2].loc, "bernoulli: generator= is not supported in kiln script (kiln's generator is used)");
    LoweringBuilder lb(L);
    Value* x = L.tensor_arg(a[0], "input");
    if (!is_given(a[1])) return composite::bernoulli(lb, x);
    return composite::bernoulli(lb, x, L.tensor_arg(a[1], "p", true));
  });
  add("rand_like", kFn, {"input", "dtype"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    if (is_given(a[1])) L.fail(a[1].loc, "rand_like: dtype= is not supported in kiln script");
    LoweringBuilder lb(L);
    return lb.rand_like(L.tensor_arg(a[0], "input"));
  });
  add("randn_like", kFn, {"input", "dtype"}, 1, [](Lowerer& L, Args& a, const Expr&) {
    if (is_given(a[1])) L.fail(a[1].loc, "randn_like: dtype= is not supported in kiln script");
    LoweringBuilder lb(L);
    return composite::randn_like(lb, L.tensor_arg(a[0], "input"));
  });
}

}  // namespace

std::vector<std::string> builtin_names(bool methods) {
  std::vector<std::string> out;
  for (const Builtin& b : builtins()) {
    if (methods && (b.where & kMethod)) out.push_back(b.name);
    if (!methods && (b.where & kFn)) out.push_back("torch." + b.name);
    if (!methods && (b.where & kPython)) out.push_back(b.name);
  }
  return out;
}

bool functional_exists(const std::string& name) {
  for (const Builtin& b : builtins())
    if (b.name == name && (b.where & kF)) return true;
  return false;
}

Value* call_builtin(Lowerer& L, const std::string& qualified, const Expr& call, Value* self) {
  bool method = self != nullptr;
  bool torch_fn = !method && qualified.rfind("torch.", 0) == 0;
  bool functional = !method && qualified.rfind("F.", 0) == 0;
  std::string name = torch_fn ? qualified.substr(6) : functional ? qualified.substr(2) : qualified;
  const Expr& fn = *call.args[0];
  if (!method && !torch_fn && !functional) {
    if (name == "range") L.fail(fn.loc, "range() is only supported as the iterable of a for loop");
    if (name == "print") L.fail(fn.loc, "print is not supported in kiln script");
    if (name == "isinstance")
      if (auto known = L.isinstance_known(call)) return L.constant(*known);
    if (name == "type")  // TorchScript has no type() either; __init__ evaluates it
      L.fail(fn.loc, "type() is not supported in lowered code (TorchScript refuses it too); __init__ may use it");
    if (name == "isinstance" || name == "getattr" || name == "setattr" || name == "hasattr")
      L.fail(fn.loc, fmt::format("{}() is not supported in kiln script", name));
  }
  const Builtin* b = nullptr;
  unsigned want = method ? kMethod : torch_fn ? kFn : functional ? kF : kPython;
  for (const Builtin& x : builtins())
    if (x.name == name && (x.where & want)) b = &x;
  if (!b) {
    std::vector<std::string> cands = builtin_names(method);
    if (!method && !torch_fn) {
      // a bare name: this file's functions and Python's builtins
      std::vector<std::string> names;
      for (const std::string& c : cands)
        if (c.rfind("torch.", 0) != 0) names.push_back(c);
      cands = names;
    }
    if (functional) {
      std::vector<std::string> fs;
      for (const Builtin& x : builtins())
        if (x.where & kF) fs.push_back(x.name);
      L.fail(fn.loc, fmt::format("torch.nn.functional.{} is not supported in kiln script{}", name, did_you_mean(name, fs)));
    }
    if (method)
      L.fail(fn.loc, fmt::format("unknown tensor method '{}'{}", name, did_you_mean(name, cands)));
    if (torch_fn)
      L.fail(fn.loc, fmt::format("unknown function {}{}", qualified, did_you_mean(qualified, cands)));
    L.fail(fn.loc, fmt::format("unknown function '{}'{}", name, did_you_mean(name, cands)));
  }
  std::string shown = display(*b, method, functional);
  Args args(b->params.size());
  size_t slot = 0;
  if (method) args[slot++] = Arg{nullptr, self, fn.loc};
  size_t npos = call.args.size() - 1;
  const bool starred = std::any_of(call.args.begin() + 1, call.args.end(), [](const ExprPtr& x) { return x->kind == ExprKind::Starred; });
  if (b->varargs && (npos > 1 || starred) && (method || b->name == "zeros" || b->name == "ones" || b->name == "empty")) {
    // x.view(2, -1), torch.zeros(n, m): each positional (after self) is one int of the shape; a starred tuple
    // (x.view(x.size(0), *img_shape)) gives each of its ints
    std::vector<Value*> es;
    Shape ints;
    bool all_const = true;
    for (size_t i = 1; i < call.args.size(); ++i) {
      if (call.args[i]->kind == ExprKind::Starred) {
        Value* t = L.expr(*call.args[i]->args[0]);
        const std::string error = fmt::format("{}: a starred argument must be a tuple of ints, got {}", shown, t->type().str());
        if (t->type().kind != TypeKind::Tuple) L.fail(call.args[i]->loc, error);
        for (Value* x : tuple_ints(L, t, call.args[i]->loc, error)) es.push_back(x);
        all_const = false;
        continue;
      }
      Arg ai{call.args[i].get(), nullptr, call.args[i]->loc};
      if (auto c = L.const_int(ai)) ints.push_back(*c);
      else all_const = false;
      es.push_back(int_arg(L, ai, shown));
    }
    Value* list = L.prim(Prim::ListConstruct, es, Type::list(kInt));
    if (method && b->name.starts_with("new_")) {
      // x.new_zeros(2, n, h) (word_lm's init_hidden): the sizes are the size argument; dtype= and device= bind below
      args[slot++] = Arg{nullptr, list, call.loc};
      npos = 0;
    } else if (!method) {
      Arg dt;
      for (const Keyword& k : call.keywords) {
        if (k.name == "device") {
          check_device(L, Arg{k.value.get(), nullptr, k.value->loc});
          continue;
        }
        if (k.name != "dtype") L.fail(k.loc, fmt::format("{}() got an unexpected keyword argument '{}'{}", shown, k.name,
                                                         did_you_mean(k.name, {"dtype", "device"})));
        dt = Arg{k.value.get(), nullptr, k.value->loc};
      }
      return full_of(L, Arg{nullptr, list, call.loc}, L.constant(int64_t(b->name == "ones")), dt);
    } else {
      Value* x = L.tensor_arg(args[0], "input");
      if (b->name == "permute") {
        if (!all_const) L.fail(call.loc, fmt::format("{} takes int constants in kiln script", shown));
        return L.op(OpId::Permute, {x}, Attrs().set("dims", ints));
      }
      if (b->name == "expand") return all_const ? L.op(OpId::Expand, {x}, Attrs().set("shape", ints)) : expand_to(L, x, list);
      if (b->name == "repeat") {
        if (!all_const) L.fail(call.loc, fmt::format("{} takes int constants in kiln script", shown));
        return repeat_of(L, x, ints);
      }
      if (all_const) return L.op(OpId::Reshape, {x}, Attrs().set("shape", ints));
      return L.prim(Prim::Reshape, {x, list}, Type::tensor());
    }
  }
  for (size_t i = 1; npos && i < call.args.size(); ++i) {
    if (slot >= args.size())
      L.fail(call.args[i]->loc, fmt::format("{}() takes at most {} positional arguments, got {}", shown,
                                            b->params.size() - (method ? 1 : 0), npos));
    args[slot++] = Arg{call.args[i].get(), nullptr, call.args[i]->loc};
  }
  for (const Keyword& k : call.keywords) {
    size_t i = 0;
    while (i < b->params.size() && b->params[i] != k.name) ++i;
    if (i == b->params.size() || (method && i == 0)) {
      std::vector<std::string> ps(b->params.begin() + (method ? 1 : 0), b->params.end());
      L.fail(k.loc, fmt::format("{}() got an unexpected keyword argument '{}'{}", shown, k.name, did_you_mean(k.name, ps)));
    }
    if (args[i].present()) L.fail(k.loc, fmt::format("{}() got multiple values for argument '{}'", shown, k.name));
    args[i] = Arg{k.value.get(), nullptr, k.value->loc};
  }
  for (size_t i = 0; i < b->required; ++i)
    if (!args[i].present())
      L.fail(call.loc, fmt::format("{}() is missing required argument '{}'", shown, b->params[i]));
  return b->lower(L, args, call);
}

std::optional<Value*> tensor_attribute(Lowerer& L, Value* x, const std::string& attr, SourceLoc loc) {
  (void)loc;
  if (attr == "device") return L.device_value();
  if (attr == "dtype") return L.dtype_value(L.prim(Prim::DTypeOf, {x}, kInt));
  if (attr == "is_cuda") return L.prim(Prim::IsCuda, {x}, kBool);
  if (attr == "shape") return L.prim(Prim::Shape, {x}, Type::list(kInt));
  if (attr == "T" || attr == "mT") return L.op(OpId::Permute, {x}, Attrs().set("dims", Shape{1, 0}));
  if (attr == "ndim") return L.prim(Prim::Len, {L.prim(Prim::Shape, {x}, Type::list(kInt))}, kInt);
  return std::nullopt;
}

}  // namespace kiln::script
