// Expression lowering: names, literals, operators with Python's semantics, indexing and calls.
#include <fmt/format.h>

#include <climits>
#include <functional>
#include <cmath>

#include "eager/composites.h"
#include "eager/composites_tensor_ops.h"
#include "eager/tensor_ops.h"
#include "script_frontend/index_masks.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/python_math.h"
#include "script_frontend/lowering_builder.h"
#include "script_frontend/operators.h"
#include "script_frontend/packed_sequences.h"
#include "script_frontend/torch_devices.h"

namespace kiln::script {

using ir::Node;
using ir::Prim;

namespace {
const Type kInt = Type::scalar(TypeKind::Int);
const Type kFloat = Type::scalar(TypeKind::Float);
const Type kBool = Type::scalar(TypeKind::Bool);

const AttrValue* const_attr(const Value* v) {
  const Node* n = v->node();
  if (n->prim() != Prim::Constant || n->tensor().defined()) return nullptr;
  for (const auto& [k, a] : n->attrs().items())
    if (k == "value") return &a;
  return nullptr;
}

}  // namespace

// int op int on two constants folds to a constant (Python's floor semantics), so `2 ** 3` and
// `n - 1` with n bound to a literal stay usable where a constant is required. Overflow is left to
// run time.
namespace {
bool fold(Prim p, int64_t u, int64_t v, int64_t* out) {
  int64_t r = 0;
  if (p == Prim::NumAdd) {
    if (__builtin_add_overflow(u, v, &r)) return false;
  } else if (p == Prim::NumSub) {
    if (__builtin_sub_overflow(u, v, &r)) return false;
  } else if (p == Prim::NumMul) {
    if (__builtin_mul_overflow(u, v, &r)) return false;
  } else if (p == Prim::NumFloorDiv || p == Prim::NumMod) {
    if (v == 0 || (u == INT64_MIN && v == -1)) return false;
    int64_t q = u / v, m = u % v;
    if (m != 0 && ((m < 0) != (v < 0))) {
      --q;
      m += v;
    }
    r = p == Prim::NumFloorDiv ? q : m;
  } else if (p == Prim::NumPow) {
    if (v < 0 || v > 64) return false;
    r = 1;
    for (int64_t i = 0; i < v; ++i)
      if (__builtin_mul_overflow(r, u, &r)) return false;
  } else {
    return false;
  }
  *out = r;
  return true;
}
}  // namespace

Value* Lowerer::fold_ints(Prim p, Value* a, Value* b) {
  const AttrValue* x = const_attr(a);
  const AttrValue* y = const_attr(b);
  if (!x || !y || !std::holds_alternative<int64_t>(*x) || !std::holds_alternative<int64_t>(*y)) return nullptr;
  int64_t r;
  if (!fold(p, std::get<int64_t>(*x), std::get<int64_t>(*y), &r)) return nullptr;
  return constant(r);
}

// An int expression of literals and names bound to int constants, evaluated without emitting nodes.
std::optional<int64_t> Lowerer::static_int(const Expr& e) {
  if (e.kind == ExprKind::Int) return e.int_value;
  if (e.kind == ExprKind::Name) {
    auto it = frame().env.find(e.name);
    if (it == frame().env.end()) {
      const Static* g = global_static(e);  // a module-level constant
      if (g && (g->kind == Static::Kind::Int || g->kind == Static::Kind::Bool)) return g->i;
      return std::nullopt;
    }
    const AttrValue* v = const_attr(it->second);
    if (v && std::holds_alternative<int64_t>(*v)) return std::get<int64_t>(*v);
    return std::nullopt;
  }
  if (e.kind == ExprKind::Attribute) {
    // self.head_dim: an int attribute of a module is a constant
    const Object* o = static_object(*e.args[0]);
    const Static* a = o ? o->attr(e.name) : nullptr;
    if (a && (a->kind == Static::Kind::Int || a->kind == Static::Kind::Bool)) return a->i;
    return std::nullopt;
  }
  if (e.kind == ExprKind::Unary) {
    if (e.op != PyOp::Neg && e.op != PyOp::Pos) return std::nullopt;
    auto v = static_int(*e.args[0]);
    if (!v || *v == INT64_MIN) return std::nullopt;
    return e.op == PyOp::Neg ? -*v : *v;
  }
  if (e.kind == ExprKind::Binary) {
    const Operator* o = find_operator(e.op);
    Prim p = o ? o->number : Prim::Op;
    if (p == Prim::Op) return std::nullopt;
    auto a = static_int(*e.args[0]);
    if (!a) return std::nullopt;
    auto b = static_int(*e.args[1]);
    int64_t r;
    if (!b || !fold(p, *a, *b, &r)) return std::nullopt;
    return r;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- constants

std::optional<int64_t> Lowerer::const_int(const Arg& a) {
  if (a.expr && !a.value) return static_int(*a.expr);
  if (!a.value) return std::nullopt;
  const AttrValue* v = const_attr(a.value);
  if (v && std::holds_alternative<int64_t>(*v)) return std::get<int64_t>(*v);
  return std::nullopt;
}

std::optional<double> Lowerer::const_float(const Arg& a) {
  if (auto i = const_int(a)) return double(*i);
  if (!a.expr) return std::nullopt;
  const Expr& e = *a.expr;
  if (e.kind == ExprKind::Float) return e.float_value;
  if (e.kind == ExprKind::Unary && e.op == PyOp::Neg && e.args[0]->kind == ExprKind::Float) return -e.args[0]->float_value;
  // nanoGPT's `dropout_p=self.dropout if self.training else 0`: the branch the module's mode takes
  if (e.kind == ExprKind::IfExp)
    if (std::optional<bool> known = static_condition(*e.args[0])) {
      const Expr& taken = *e.args[*known ? 1 : 2];
      return const_float(Arg{&taken, nullptr, taken.loc});
    }
  if (e.kind == ExprKind::Name) {
    auto it = frame().env.find(e.name);
    if (it == frame().env.end()) {
      const Static* g = global_static(e);
      if (g && g->kind == Static::Kind::Float) return g->f;
      return std::nullopt;
    }
    const AttrValue* v = const_attr(it->second);
    if (v && std::holds_alternative<double>(*v)) return std::get<double>(*v);
  }
  if (e.kind == ExprKind::Attribute) {
    const Object* o = static_object(*e.args[0]);
    const Static* a = o ? o->attr(e.name) : nullptr;
    if (a && a->kind == Static::Kind::Float) return a->f;
  }
  return std::nullopt;
}

std::optional<bool> Lowerer::const_bool(const Arg& a) {
  if (!a.expr) return std::nullopt;
  const Expr& e = *a.expr;
  if (e.kind == ExprKind::Bool) return e.int_value != 0;
  if (e.kind == ExprKind::Attribute)
    if (const Object* o = static_object(*e.args[0])) {
      if (e.name == "training") return o->module->is_training();
      const Static* a = o->attr(e.name);
      if (a && a->kind == Static::Kind::Bool) return a->i != 0;
    }
  if (e.kind == ExprKind::Name) {
    auto it = frame().env.find(e.name);
    if (it == frame().env.end()) {
      const Static* g = global_static(e);
      if (g && g->kind == Static::Kind::Bool) return g->i != 0;
      return std::nullopt;
    }
    const AttrValue* v = const_attr(it->second);
    if (v && std::holds_alternative<bool>(*v)) return std::get<bool>(*v);
  }
  return std::nullopt;
}

std::optional<std::string> Lowerer::const_str(const Arg& a) {
  if (a.expr && a.expr->kind == ExprKind::String) return a.expr->name;
  if (a.expr && a.expr->kind == ExprKind::Attribute)
    if (const Object* o = static_object(*a.expr->args[0])) {
      const Static* v = o->attr(a.expr->name);
      if (v && v->kind == Static::Kind::Str) return v->s;
    }
  // an inlined argument (torchvision's stochastic_depth `mode`, in its raise's f-string)
  if (a.expr && a.expr->kind == ExprKind::Name)
    if (auto it = frame().env.find(a.expr->name); it != frame().env.end())
      if (const AttrValue* v = const_attr(it->second); v && std::holds_alternative<std::string>(*v)) return std::get<std::string>(*v);
  if (const Static* g = a.expr && !a.value ? global_static(*a.expr) : nullptr; g && g->kind == Static::Kind::Str) return g->s;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> Lowerer::const_ints(const Arg& a) {
  if (auto i = const_int(a)) return std::vector<int64_t>{*i};
  // self.weight.shape (nanoGPT's LayerNorm): a module's tensors keep their shapes, so it is known now
  if (a.expr && a.expr->kind == ExprKind::Attribute && a.expr->name == "shape" && a.expr->args[0]->kind == ExprKind::Attribute)
    if (const Object* o = static_object(*a.expr->args[0]->args[0])) {
      const std::string& name = a.expr->args[0]->name;
      const Static* v = o->attr(name);
      if (v && v->kind == Static::Kind::Tensor) return v->tensor.sizes();
      for (auto& [n, t] : o->module->named_parameters(false))
        if (n == name) return t.sizes();
      for (auto& [n, t] : o->module->named_buffers(false))
        if (n == name) return t.sizes();
    }
  if (a.expr && a.expr->kind == ExprKind::Attribute)
    if (const Object* o = static_object(*a.expr->args[0])) {
      const Static* v = o->attr(a.expr->name);
      if (!v || (v->kind != Static::Kind::Tuple && v->kind != Static::Kind::List)) return std::nullopt;
      std::vector<int64_t> out;
      for (const Static& x : v->elems) {
        if (x.kind != Static::Kind::Int) return std::nullopt;
        out.push_back(x.i);
      }
      return out;
    }
  if (const Static* g = a.expr && !a.value ? global_static(*a.expr) : nullptr; g && (g->kind == Static::Kind::Tuple || g->kind == Static::Kind::List)) {
    std::vector<int64_t> out;  // KERNEL = (3, 3) at module level
    for (const Static& x : g->elems) {
      if (x.kind != Static::Kind::Int) return std::nullopt;
      out.push_back(x.i);
    }
    return out;
  }
  if (!a.expr || (a.expr->kind != ExprKind::Tuple && a.expr->kind != ExprKind::List)) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& e : a.expr->args) {
    auto i = const_int(Arg{e.get(), nullptr, e->loc});
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

int64_t Lowerer::need_int(const Arg& a, std::string_view what) {
  if (auto i = const_int(a)) return *i;
  fail(a.loc, fmt::format("{} must be an int constant in kiln script (a literal or a name bound to one)", what));
}

bool Lowerer::need_bool(const Arg& a, std::string_view what) {
  if (auto b = const_bool(a)) return *b;
  fail(a.loc, fmt::format("{} must be True or False (a constant) in kiln script", what));
}

std::vector<int64_t> Lowerer::need_ints(const Arg& a, std::string_view what) {
  if (auto v = const_ints(a)) return *v;
  fail(a.loc, fmt::format("{} must be an int or a tuple of ints, each a constant, in kiln script", what));
}

Value* Lowerer::tensor_arg(const Arg& a, std::string_view what, bool numbers_ok) {
  Value* v = value_of(a);
  if (v->type().is_tensor()) return v;
  if (numbers_ok && is_number(v->type())) {
    loc_ = a.loc;
    return number_to_tensor(v);
  }
  fail(a.loc, fmt::format("{} expects a Tensor{}, got {}", what, numbers_ok ? " or a number" : "", v->type().str()));
}

// ---------------------------------------------------------------- expressions

Value* Lowerer::expr(const Expr& e) {
  SourceLoc saved = loc_;
  loc_ = e.loc;
  Value* v = nullptr;
  switch (e.kind) {
    case ExprKind::Name: v = name(e); break;
    case ExprKind::Int: v = constant(e.int_value); break;
    case ExprKind::Float: v = constant(e.float_value); break;
    case ExprKind::Bool: v = constant(e.int_value != 0); break;
    case ExprKind::None: v = g_->insert_none(); break;
    case ExprKind::String: v = g_->insert_constant(e.name); break;
    case ExprKind::Ellipsis: fail(e.loc, "'...' is only supported inside a tensor subscript");
    case ExprKind::Tuple: {
      std::vector<Value*> es;
      for (const auto& a : e.args) es.push_back(expr(*a));
      loc_ = e.loc;
      v = tuple(es);
      break;
    }
    case ExprKind::List: {
      if (e.args.empty())
        fail(e.loc, "an empty list needs a type: annotate it, e.g. `xs: List[Tensor] = []`");
      std::vector<Value*> es;
      for (const auto& a : e.args) es.push_back(expr(*a));
      Type et = es[0]->type();
      if (!et.is_tensor() && !is_number(et)) fail(e.loc, fmt::format("lists of {} are not supported", et.str()));
      for (size_t i = 1; i < es.size(); ++i)
        if (!same_type(es[i]->type(), et))
          fail(e.args[i]->loc, fmt::format("list elements must have one type: {} and {}", et.str(), es[i]->type().str()));
      loc_ = e.loc;
      v = prim(Prim::ListConstruct, es, Type::list(et.is_tensor() ? Type::tensor() : et));
      break;
    }
    case ExprKind::Attribute: v = attribute(e); break;
    case ExprKind::Call: v = call(e); break;
    case ExprKind::Subscript: v = subscript(e); break;
    case ExprKind::Slice: fail(e.loc, "a slice is only supported inside a subscript");
    case ExprKind::Unary: v = unary(e); break;
    case ExprKind::Binary: {
      Value* a = expr(*e.args[0]);
      Value* b = expr(*e.args[1]);
      loc_ = e.loc;
      v = binary(e.op, a, b, e.loc);
      break;
    }
    case ExprKind::BoolOp: v = bool_op(e, 0); break;
    case ExprKind::Compare: v = compare_chain(e, 0, expr(*e.args[0])); break;
    case ExprKind::Starred: fail(e.loc, "starred expressions are only supported in __init__ (nn.Sequential(*layers))");
    case ExprKind::Dict: v = dict_literal(e); break;
    case ExprKind::BigInt: fail(e.loc, fmt::format("integer literal {} does not fit in int64", e.name));
    case ExprKind::Imaginary:
    case ExprKind::Bytes:
    case ExprKind::FString:
    case ExprKind::FormattedValue:
    case ExprKind::Set:
    case ExprKind::ListComp:
    case ExprKind::SetComp:
    case ExprKind::DictComp:
    case ExprKind::GeneratorExp:
    case ExprKind::Lambda:
    case ExprKind::NamedExpr:
    case ExprKind::Yield:
    case ExprKind::YieldFrom:
    case ExprKind::Await: fail(e.loc, fmt::format("{} not supported in kiln script{}", unsupported_construct(e.kind), torchscript_accepts(e.kind)));
    case ExprKind::IfExp: {
      if (std::optional<bool> known = static_condition(*e.args[0])) {
        v = expr(*e.args[*known ? 1 : 2]);
        break;
      }
      Value* c = to_condition(expr(*e.args[0]), e.args[0]->loc);
      loc_ = e.loc;
      v = if_value(c, [&] { return expr(*e.args[1]); }, [&] { return expr(*e.args[2]); }, e.loc);
      break;
    }
  }
  loc_ = saved;
  return v;
}

Value* Lowerer::name(const Expr& e) {
  auto it = frame().env.find(e.name);
  if (it != frame().env.end()) return it->second;
  if (frame().partial.count(e.name))
    fail(e.loc, fmt::format("'{}' is not defined on every path to here (it is assigned in only some branches, or "
                            "only inside a loop)",
                            e.name));
  if (e.name == "torch") fail(e.loc, "the torch module is not a value; call torch.<function>(...)");
  if (const Object* o = static_object(e))
    fail(e.loc, fmt::format("'{}' is a module ({}), not a value; call it or read its attributes", e.name, o->cls));
  for (const auto& f : m_->functions)
    if (f->name == e.name) fail(e.loc, fmt::format("function '{}' is not a value; call it", e.name));
  if (const ModuleGlobal* g = module_global(e.name, e.loc)) {
    if (g->value.kind == Static::Kind::Function) fail(e.loc, fmt::format("function '{}' is not a value; call it", e.name));
    return static_value(g->value, e.name, e.loc);
  }
  if (const std::string* why = m_->why_unavailable(e.name)) fail(e.loc, *why);
  if (m_->nn_names.count(e.name) || m_->functional_names.count(e.name))
    // DCGAN's nn.parallel.data_parallel(...), lowered where the branch depends on x.is_cuda
    fail(e.loc, fmt::format("'{}' is the module {}, not a value in kiln script", e.name,
                            m_->nn_names.count(e.name) ? "torch.nn" : "torch.nn.functional"));
  std::vector<std::string> cands;
  for (auto& [k, v] : frame().env)
    if (k[0] != '$') cands.push_back(k);
  fail(e.loc, fmt::format("undefined name '{}'{}", e.name, did_you_mean(e.name, cands)));
}

Value* Lowerer::binary(PyOp op, Value* a, Value* b, SourceLoc loc) {
  const Type& ta = a->type();
  const Type& tb = b->type();
  bool tensors = (ta.is_tensor() || is_number(ta)) && (tb.is_tensor() || is_number(tb)) && (ta.is_tensor() || tb.is_tensor());
  const Operator* row = find_operator(op);
  auto bad = [&]() -> Value* {
    if (row && !row->verb.empty()) {
      if (op == PyOp::Pow) fail(loc, fmt::format("cannot raise {} to the power {}", ta.str(), tb.str()));
      fail(loc, fmt::format("cannot {} {} and {}", row->verb, ta.str(), tb.str()));
    }
    fail(loc, fmt::format("unsupported operand types for {}: {} and {}", spelling(op), ta.str(), tb.str()));
  };
  if (Value* l = list_binary(op, a, b)) return l;
  if (tensors) {
    Value* x = ta.is_tensor() ? a : number_to_tensor(a);
    Value* y = tb.is_tensor() ? b : number_to_tensor(b);
    if (op == PyOp::MatMul && (!ta.is_tensor() || !tb.is_tensor())) return bad();
    if (row && row->tensor) return this->op(*row->tensor, {x, y});
    if (op == PyOp::FloorDiv) return this->op(OpId::FloorDivide, {x, y});
    if (op == PyOp::Mod) {
      LoweringBuilder lb(*this);
      return composite::remainder(lb, x, y);
    }
    return bad();
  }
  if (is_number(ta) && is_number(tb)) {
    Prim p = row ? row->number : Prim::Op;
    if (p == Prim::Op) return bad();
    if (Value* folded = fold_ints(p, a, b)) return folded;
    bool any_float = ta.kind == TypeKind::Float || tb.kind == TypeKind::Float;
    Type out = (p == Prim::NumDiv || any_float) ? kFloat : kInt;
    if (p == Prim::NumPow && !any_float) {
      // int ** int is an int in Python unless the exponent is negative; kiln needs the type now.
      auto e = const_int(Arg{nullptr, b, loc});
      if (!e || *e < 0) out = kFloat;
      if (!e) fail(loc, "int ** int needs a non-negative constant exponent in kiln script (its type depends on the sign); use float()");
    }
    return prim(p, {a, b}, out);
  }
  return bad();
}

Value* Lowerer::compare(PyOp op, const Expr& ea, Value* a, const Expr& eb, Value* b, SourceLoc loc) {
  const Type& ta = a->type();
  const Type& tb = b->type();
  if (op == PyOp::Is || op == PyOp::IsNot) {
    bool want_none = op == PyOp::Is;
    const Value* other = nullptr;
    if (eb.kind == ExprKind::None) other = a;
    else if (ea.kind == ExprKind::None) other = b;
    if (!other) fail(loc, fmt::format("'{}' is only supported against None in kiln script", spelling(op)));
    const Type& t = other->type();
    if (t.kind == TypeKind::Optional) {
      Value* isn = prim(Prim::IsNone, {const_cast<Value*>(other)}, kBool);
      return want_none ? isn : prim(Prim::Not, {isn}, kBool);
    }
    // Known now: a None is None, anything else is not.
    return constant(want_none == (t.kind == TypeKind::None));
  }
  if (op == PyOp::In || op == PyOp::NotIn) {
    // Over a tuple or list whose elements are known here: a chain of ==, decided now when all are
    // constants.
    if (const auto* keys = dict_keys(b)) {
      auto k = const_str(Arg{&ea, nullptr, ea.loc});
      if (!k) fail(ea.loc, "'in' over a dict needs a string constant key in kiln script");
      bool found = std::find(keys->begin(), keys->end(), *k) != keys->end();
      return constant(op == PyOp::In ? found : !found);
    }
    ir::Node* n = b->node();
    if (tb.kind == TypeKind::List && n->prim() != Prim::ListConstruct) {
      // A list built at run time: a loop over its elements.
      Value* found = list_contains(b, a, loc);
      return op == PyOp::In ? found : prim(Prim::Not, {found}, kBool);
    }
    if (n->prim() != Prim::TupleConstruct && n->prim() != Prim::ListConstruct)
      fail(loc, fmt::format("'{}' needs a tuple or list written out in kiln script, got {}", spelling(op), tb.str()));
    Value* found = constant(false);
    for (Value* e : n->inputs()) {
      const AttrValue* ca = const_attr(a);
      const AttrValue* ce = const_attr(e);
      Value* eq = nullptr;
      if (ca && ce && ta.kind == TypeKind::Str && e->type().kind == TypeKind::Str) {
        eq = constant(std::get<std::string>(*ca) == std::get<std::string>(*ce));
      } else if (is_number(ta) && is_number(e->type())) {
        eq = prim(Prim::NumEq, {a, e}, kBool);
        if (ca && ce) {
          double x = std::holds_alternative<int64_t>(*ca) ? double(std::get<int64_t>(*ca)) : std::holds_alternative<double>(*ca) ? std::get<double>(*ca) : double(std::get<bool>(*ca));
          double y = std::holds_alternative<int64_t>(*ce) ? double(std::get<int64_t>(*ce)) : std::holds_alternative<double>(*ce) ? std::get<double>(*ce) : double(std::get<bool>(*ce));
          eq = constant(x == y);
        }
      } else {
        fail(loc, fmt::format("'{}' compares {} with the elements of {}; kiln script compares numbers, and strings known "
                              "when lowering",
                              spelling(op), ta.str(), tb.str()));
      }
      const AttrValue* cf = const_attr(found);
      const AttrValue* cq = const_attr(eq);
      if (cf && std::get<bool>(*cf)) break;
      if (cf && cq) {
        found = eq;
        continue;
      }
      Value* prev = found;
      found = if_value(prev, [&] { return constant(true); }, [&] { return eq; }, loc);
    }
    if (op == PyOp::NotIn) {
      if (const AttrValue* cf = const_attr(found)) return constant(!std::get<bool>(*cf));
      return prim(Prim::Not, {found}, kBool);
    }
    return found;
  }
  bool tensors = (ta.is_tensor() || is_number(ta)) && (tb.is_tensor() || is_number(tb)) && (ta.is_tensor() || tb.is_tensor());
  if (tensors) {
    Value* x = ta.is_tensor() ? a : number_to_tensor(a);
    Value* y = tb.is_tensor() ? b : number_to_tensor(b);
    return this->op(*find_operator(op)->tensor, {x, y});
  }
  if (is_number(ta) && is_number(tb)) {
    return prim(find_operator(op)->number, {a, b}, kBool);
  }
  if ((op == PyOp::Eq || op == PyOp::Ne) && ta.kind == TypeKind::None && tb.kind == TypeKind::None) return constant(op == PyOp::Eq);
  // Strings known when lowering (a dict's keys in a loop over items()): decided now.
  if ((op == PyOp::Eq || op == PyOp::Ne) && ta.kind == TypeKind::Str && tb.kind == TypeKind::Str) {
    const AttrValue* ca = const_attr(a);
    const AttrValue* cb = const_attr(b);
    if (ca && cb) return constant((std::get<std::string>(*ca) == std::get<std::string>(*cb)) == (op == PyOp::Eq));
    fail(loc, "kiln script compares strings known when lowering only");
  }
  fail(loc, fmt::format("cannot compare {} and {} with '{}'", ta.str(), tb.str(), spelling(op)));
}

Value* Lowerer::list_contains(Value* list, Value* x, SourceLoc loc) {
  const Type& et = list->type().elems[0];
  if (!is_number(et) || !is_number(x->type()))
    fail(loc, fmt::format("'in' over a {} built at run time compares numbers in kiln script, got {}", list->type().str(),
                          x->type().str()));
  // found = False; for e in list: found = found or e == x   (a prim::Loop that stops once found)
  Value* trip = prim(Prim::Len, {list}, kInt);
  Value* go = constant(true);
  Value* none_yet = constant(false);
  Node* n = emit(g_->create(Prim::Loop, 0));
  n->add_input(trip);
  n->add_input(go);
  n->add_input(none_yet);
  ir::Block* b = n->add_block();
  Value* i = b->add_input(kInt, "iter");
  b->add_input(kBool, "found");
  {
    ir::InsertPointGuard guard(*g_);
    g_->set_insert_point(b);
    Value* eq = prim(Prim::NumEq, {prim(Prim::ListIndex, {list, i}, et), x}, kBool);
    b->register_output(prim(Prim::Not, {eq}, kBool));
    b->register_output(eq);
  }
  return n->add_output(kBool);
}

// a < b < c is (a < b) and (b < c), with b evaluated once, short-circuiting as Python does.
Value* Lowerer::compare_chain(const Expr& e, size_t from, Value* left) {
  Value* right = expr(*e.args[from + 1]);
  loc_ = e.loc;
  Value* c = compare(e.ops[from], *e.args[from], left, *e.args[from + 1], right, e.loc);
  if (from + 1 == e.ops.size()) return c;
  Value* cb = to_condition(c, e.loc);
  return if_value(cb, [&] { return to_condition(compare_chain(e, from + 1, right), e.loc); },
                  [&] { return constant(false); }, e.loc);
}

Value* Lowerer::bool_op(const Expr& e, size_t from) {
  Value* a = to_condition(expr(*e.args[from]), e.args[from]->loc);
  if (from + 1 == e.args.size()) return a;
  loc_ = e.loc;
  if (e.op == PyOp::And)
    return if_value(a, [&] { return bool_op(e, from + 1); }, [&] { return constant(false); }, e.loc);
  return if_value(a, [&] { return constant(true); }, [&] { return bool_op(e, from + 1); }, e.loc);
}

Value* Lowerer::unary(const Expr& e) {
  const Expr& operand = *e.args[0];
  if (e.op == PyOp::Neg && operand.kind == ExprKind::Int) return constant(-operand.int_value);
  if (e.op == PyOp::Neg && operand.kind == ExprKind::Float) return constant(-operand.float_value);
  Value* x = expr(operand);
  loc_ = e.loc;
  const Type& t = x->type();
  switch (e.op) {
    case PyOp::Not: return prim(Prim::Not, {to_condition(x, operand.loc)}, kBool);
    case PyOp::Pos:
      if (t.is_tensor() || is_number(t)) return x;
      break;
    case PyOp::Neg:
      if (t.is_tensor()) return op(OpId::Neg, {x});
      if (t.kind == TypeKind::Int || t.kind == TypeKind::Float) return prim(Prim::NumNeg, {x}, t);
      if (t.kind == TypeKind::Bool) return prim(Prim::NumNeg, {x}, kInt);
      break;
    case PyOp::Invert:
      if (t.is_tensor()) return op(OpId::LogicalNot, {x});
      break;
    default: fail(e.loc, fmt::format("'{}' is not a unary operator", spelling(e.op)));
  }
  fail(e.loc, fmt::format("bad operand type for unary {}: {}", spelling(e.op), t.str()));
}

// ---------------------------------------------------------------- indexing

Value* Lowerer::select_dynamic(Value* x, int64_t dim, Value* index) {
  // index_select with a one-element index, then drop the dim; a negative index counts from the end.
  Value* size = prim(Prim::Size, {x, constant(dim)}, kInt);
  Value* neg = prim(Prim::NumLt, {index, constant(int64_t(0))}, kBool);
  Value* fixed = if_value(neg, [&] { return prim(Prim::NumAdd, {index, size}, kInt); }, [&] { return index; }, loc_);
  Value* idx = op(OpId::Reshape, {number_to_tensor(fixed)}, Attrs().set("shape", Shape{1}));
  Value* picked = op(OpId::IndexSelect, {x, idx}, Attrs().set("dim", dim));
  return op(OpId::Squeeze, {picked}, Attrs().set("dims", Shape{dim}));
}

Value* Lowerer::subscript(const Expr& e) {
  const Expr& base = *e.args[0];
  // x.shape[i] and x.size()[i]: one prim::size
  if (base.kind == ExprKind::Attribute && base.name == "shape" && e.args.size() == 2 && e.args[1]->kind != ExprKind::Slice) {
    Value* x = expr(*base.args[0]);
    if (x->type().is_tensor()) {
      Value* i = expr(*e.args[1]);
      if (i->type().kind != TypeKind::Int) fail(e.args[1]->loc, fmt::format("shape indices must be int, got {}", i->type().str()));
      loc_ = e.loc;
      return prim(Prim::Size, {x, i}, kInt);
    }
  }
  Value* x = expr(base);
  loc_ = e.loc;
  const Type& t = x->type();
  if (t.is_tensor()) return tensor_index(x, e);
  if (dict_keys(x)) {
    if (e.args.size() != 2) fail(e.loc, "a dict takes one key");
    return dict_get(x, *e.args[1]);
  }
  if (e.args.size() != 2) fail(e.loc, fmt::format("{} takes one index", t.str()));
  const Expr& ix = *e.args[1];
  if (t.kind == TypeKind::Tuple) {
    int64_t n = int64_t(t.elems.size());
    if (ix.kind == ExprKind::Slice) {
      int64_t b[3] = {0, n, 1};
      for (int k = 0; k < 3; ++k)
        if (ix.args[size_t(k)]) {
          auto c = const_int(Arg{ix.args[size_t(k)].get(), nullptr, ix.args[size_t(k)]->loc});
          if (!c) fail(ix.args[size_t(k)]->loc, "tuple slice bounds must be int constants");
          b[k] = *c;
        }
      if (b[2] != 1) fail(ix.loc, "tuple slices with a step are not supported");
      for (int k = 0; k < 2; ++k) b[k] = std::clamp(b[k] < 0 ? b[k] + n : b[k], int64_t(0), n);
      std::vector<Value*> es;
      for (int64_t i = b[0]; i < b[1]; ++i) {
        Node* tn = g_->create(Prim::TupleIndex, 1);
        tn->add_input(x);
        tn->attrs().set("index", i);
        tn->output()->set_type(t.elems[size_t(i)]);
        es.push_back(emit(tn)->output());
      }
      return tuple(es);
    }
    auto c = const_int(Arg{&ix, nullptr, ix.loc});
    if (!c) fail(ix.loc, fmt::format("a tuple index must be an int constant (the elements' types differ), in {}", t.str()));
    int64_t i = *c < 0 ? *c + n : *c;
    if (i < 0 || i >= n) fail(ix.loc, fmt::format("tuple index {} is out of range for {}", *c, t.str()));
    if (x->node()->prim() == Prim::TupleConstruct) return x->node()->input(size_t(i));
    Node* tn = g_->create(Prim::TupleIndex, 1);
    tn->add_input(x);
    tn->attrs().set("index", i);
    tn->output()->set_type(t.elems[size_t(i)]);
    return emit(tn)->output();
  }
  if (t.kind == TypeKind::List) {
    if (ix.kind == ExprKind::Slice) {
      // xs[a:b] (swin's `H, W, _ = x.shape[-3:]`): prim::list_slice, Python's clamping; the step must be 1
      if (ix.args[2]) {
        auto st = const_int(Arg{ix.args[2].get(), nullptr, ix.args[2]->loc});
        if (!st || *st != 1) fail(ix.args[2]->loc, "list slices take no step other than 1 in kiln script");
      }
      Value* bounds[2];
      for (int k = 0; k < 2; ++k) {
        const Expr* b = ix.args[size_t(k)].get();
        Value* v = b ? expr(*b) : nullptr;
        if (v && v->type().kind == TypeKind::None) v = nullptr;
        if (v && v->type().kind != TypeKind::Int) fail(b->loc, fmt::format("list slice bounds must be int, got {}", v->type().str()));
        bounds[k] = v ? v : constant(k == 0 ? int64_t(0) : INT64_MAX);
      }
      loc_ = e.loc;
      return prim(Prim::ListSlice, {x, bounds[0], bounds[1]}, t);
    }
    Value* i = expr(ix);
    if (i->type().kind != TypeKind::Int) fail(ix.loc, fmt::format("list indices must be int, got {}", i->type().str()));
    loc_ = e.loc;
    return prim(Prim::ListIndex, {x, i}, t.elems[0]);
  }
  fail(e.loc, fmt::format("{} cannot be indexed", t.str()));
}

Value* Lowerer::tensor_index(Value* x, const Expr& e, const Expr* as_colon, int64_t* colon_dim) {
  size_t n = e.args.size() - 1;
  size_t ellipsis = n;
  for (size_t k = 0; k < n; ++k)
    if (e.args[k + 1]->kind == ExprKind::Ellipsis) {
      if (ellipsis != n) fail(e.args[k + 1]->loc, "an index can only have a single ellipsis ('...')");
      ellipsis = k;
    }
  // An index that may be a value (not a slice, None, ..., a list or an int constant) is lowered once, first: with
  // index tensors on two or more dims (x[idx0, idx1], x[torch.arange(n), targets]) the index is torch's advanced
  // indexing, eager's composite::index_tensors.
  std::map<const Expr*, Value*> lowered;
  auto may_be_value = [&](const Expr& ix) {
    return &ix != as_colon && ix.kind != ExprKind::Slice && ix.kind != ExprKind::None && ix.kind != ExprKind::Ellipsis &&
           ix.kind != ExprKind::List && !const_int(Arg{&ix, nullptr, ix.loc});
  };
  if (std::count_if(e.args.begin() + 1, e.args.end(), [&](const ExprPtr& a) { return may_be_value(*a); }) >= 2) {
    std::vector<size_t> tensors;
    for (size_t k = 0; k < n; ++k) {
      const Expr& ix = *e.args[k + 1];
      if (!may_be_value(ix)) continue;
      lowered[&ix] = expr(ix);
      if (lowered[&ix]->type().is_tensor()) tensors.push_back(k);
    }
    if (tensors.size() >= 2) return index_tensors(x, e, tensors, lowered);
  }
  // A tensor index that is not an int tensor: a bool mask, checked against the dims it covers (torch's IndexError).
  auto by_mask = [&](Value* xv, Value* mask, int64_t dim) {
    LoweringBuilder lb(*this);
    if (dim < 0 && !lb.rank(mask)) composite::check_mask_1d(lb, mask);  // before the shape's check, whose words assume the rank
    check_mask_shape(*this, mask, xv, dim);
    return n == 1 ? composite::masked_rows(lb, xv, mask) : composite::masked_dim(lb, xv, dim, mask);
  };
  auto apply = [&](const Expr& ix, int64_t dim, bool* removes) -> Value* {
    *removes = false;
    loc_ = ix.loc;
    if (&ix == as_colon) {
      *colon_dim = dim;
      return x;
    }
    if (ix.kind == ExprKind::Slice) {
      Attrs a;
      a.set("dim", dim);
      const char* names[3] = {"start", "end", "step"};
      bool dynamic = false;
      for (int k = 0; k < 3; ++k)
        if (ix.args[size_t(k)]) {
          auto c = const_int(Arg{ix.args[size_t(k)].get(), nullptr, ix.args[size_t(k)]->loc});
          if (!c && k == 2) fail(ix.args[2]->loc, "tensor slice steps must be int constants in kiln script");
          if (!c) {
            dynamic = true;
            continue;
          }
          if (k == 2 && *c <= 0) fail(ix.args[2]->loc, "tensor slice steps must be positive");
          a.set(names[k], *c);
        }
      if (!dynamic) {
        ViewStep st{ViewStep::Slice, dim};
        if (a.has("start")) st.start = constant(a.i("start"));
        if (a.has("end")) st.end = constant(a.i("end"));
        st.step = a.has("step") ? a.i("step") : 1;
        Value* v = op(OpId::Slice, {x}, std::move(a));
        record_view(v, x, st);
        return v;
      }
      // A bound computed at run time (x[:, :n]): prim::slice, which takes the bounds as values.
      Value* bounds[2];
      for (int k = 0; k < 2; ++k) {
        const Expr* b = ix.args[size_t(k)].get();
        if (!b) {
          bounds[k] = g_->insert_none();
          continue;
        }
        bounds[k] = expr(*b);
        // None through a name or a tuple's element (swin's `(-shift, None)` slices): the bound is absent
        if (bounds[k]->type().kind == TypeKind::None) bounds[k] = g_->insert_none();
        if (bounds[k]->type().kind != TypeKind::Int && bounds[k]->type().kind != TypeKind::None)
          fail(b->loc, fmt::format("tensor slice bounds must be int, got {}", bounds[k]->type().str()));
      }
      loc_ = ix.loc;
      int64_t step = a.has("step") ? a.i("step") : 1;
      Type opt_int = Type::optional(kInt);
      for (Value*& b : bounds) b->set_type(b->type().kind == TypeKind::None ? opt_int : b->type());
      Value* v = prim(Prim::Slice, {x, constant(dim), bounds[0], bounds[1], constant(step)}, Type::tensor());
      ViewStep st{ViewStep::Slice, dim};
      st.start = bounds[0]->type().kind == TypeKind::Int ? bounds[0] : nullptr;
      st.end = bounds[1]->type().kind == TypeKind::Int ? bounds[1] : nullptr;
      st.step = step;
      record_view(v, x, st);
      return v;
    }
    if (ix.kind == ExprKind::None) {
      Value* v = op(OpId::Unsqueeze, {x}, Attrs().set("dim", dim));
      record_view(v, x, ViewStep{ViewStep::Unsqueeze, dim});
      return v;
    }
    if (auto c = const_int(Arg{&ix, nullptr, ix.loc})) {
      *removes = true;
      ViewStep st{ViewStep::Select, dim};
      st.index = constant(*c);
      Value* v = op(OpId::Select, {x}, Attrs().set("dim", dim).set("index", *c));
      record_view(v, x, st);
      return v;
    }
    if (ix.kind == ExprKind::List && !ix.args.empty()) {
      // x[:, [-1], :] (nanoGPT's last position, its dim kept): the listed rows in order, a copy as torch's
      // advanced indexing makes; each index is checked as a select checks it
      std::vector<Value*> rows;
      for (const auto& k : ix.args) {
        auto c = const_int(Arg{k.get(), nullptr, k->loc});
        if (!c) fail(k->loc, "a list index must hold int constants in kiln script; index with a tensor instead");
        Value* row = op(OpId::Select, {x}, Attrs().set("dim", dim).set("index", *c));
        rows.push_back(op(OpId::Unsqueeze, {row}, Attrs().set("dim", dim)));
      }
      return rows.size() == 1 ? op(OpId::Contiguous, {rows[0]}) : op(OpId::Cat, rows, Attrs().set("dim", dim));
    }
    Value* i = lowered.count(&ix) ? lowered.at(&ix) : expr(ix);
    loc_ = ix.loc;
    if (i->type().is_tensor()) {
      // x[idx] with an integer tensor: x.shape[:dim] + idx.shape + x.shape[dim + 1:] (eager's composite); a bool
      // mask selects (eager's composite::masked_rows / masked_dim), decided by the index's dtype now where it is
      // known, else when the graph runs
      LoweringBuilder lb(*this);
      auto by_ints = [&]() -> Value* { return composite::index_tensors(lb, x, dim, std::vector<Value*>{i}); };
      return lb.if_bool(i, [&] { return by_mask(x, i, dim); }, by_ints);
    }
    if (i->type().kind == TypeKind::Int) {
      *removes = true;
      ViewStep st{ViewStep::Select, dim};
      st.index = i;
      Value* v = select_dynamic(x, dim, i);
      record_view(v, x, st);
      return v;
    }
    fail(ix.loc, fmt::format("tensor indices must be int or slices, got {}", i->type().str()));
  };
  // Before the ellipsis, dims count from the front; a select removes its dim, a None adds one.
  int64_t dim = 0;
  for (size_t k = 0; k < ellipsis; ++k) {
    bool removes;
    const Expr& ix = *e.args[k + 1];
    x = apply(ix, dim, &removes);
    if (!removes) ++dim;
  }
  // After it, from the back, rightmost first.
  if (ellipsis < n) {
    int64_t back = -1;
    for (size_t k = n; k-- > ellipsis + 1;) {
      const Expr& ix = *e.args[k + 1];
      if (ix.kind == ExprKind::None) fail(ix.loc, "None after '...' in an index is not supported in kiln script");
      bool removes;
      x = apply(ix, back, &removes);
      if (!removes) --back;
    }
  }
  return x;
}

// x[idx0, idx1], x[i, :, j], x[0, i, 1:, j], x[mask, i]: index tensors on two or more dims. The other indices
// (slices, None, int constants) are basic indexing, applied first as torch applies them; a bool mask has its dims
// merged into one and stands for the positions of its true elements (torch's nonzero()); then eager's
// composite::index_dims over the dims the index tensors landed on (apart, torch puts their broadcast dims first).
// An index whose dtype is unknown now is both, chosen when the graph runs.
Value* Lowerer::index_tensors(Value* x, const Expr& e, const std::vector<size_t>& tensors,
                              const std::map<const Expr*, Value*>& lowered) {
  LoweringBuilder lb(*this);
  std::function<Value*(size_t, Value*, int64_t, std::vector<Value*>, Shape)> rest =
      [&](size_t k, Value* x, int64_t dim, std::vector<Value*> idx, Shape dims) -> Value* {
    for (; k + 1 < e.args.size(); ++k) {
      const Expr& ix = *e.args[k + 1];
      loc_ = ix.loc;
      if (std::find(tensors.begin(), tensors.end(), k) != tensors.end()) {
        Value* i = lowered.at(&ix);
        dims.push_back(dim);
        auto as_mask = [&, idx, dims]() mutable {
          loc_ = ix.loc;
          check_mask_shape(*this, i, x, dim);
          Value* merged = composite::merge_mask_dims(lb, x, dim, i);
          idx.push_back(composite::mask_positions(lb, i));
          return rest(k + 1, merged, dim + 1, idx, dims);
        };
        auto as_ints = [&, idx, dims]() mutable {
          idx.push_back(i);
          return rest(k + 1, x, dim + 1, idx, dims);
        };
        return lb.if_bool(i, as_mask, as_ints);
      }
      if (ix.kind == ExprKind::Ellipsis)
        fail(ix.loc, "with index tensors on two or more dims, kiln script takes no '...' beside them");
      if (ix.kind == ExprKind::List)
        fail(ix.loc, "with index tensors on two or more dims, kiln script takes no list beside them; index with a tensor instead");
      if (lowered.count(&ix)) {
        Value* i = lowered.at(&ix);
        if (i->type().kind != TypeKind::Int) fail(ix.loc, fmt::format("tensor indices must be int or slices, got {}", i->type().str()));
        x = select_dynamic(x, dim, i);
        continue;
      }
      if (ix.kind == ExprKind::None) {
        x = op(OpId::Unsqueeze, {x}, Attrs().set("dim", dim++));
        continue;
      }
      if (auto c = const_int(Arg{&ix, nullptr, ix.loc})) {
        x = op(OpId::Select, {x}, Attrs().set("dim", dim).set("index", *c));
        continue;
      }
      Attrs a = Attrs().set("dim", dim++);
      const char* names[3] = {"start", "end", "step"};
      for (int b = 0; b < 3; ++b)
        if (const Expr* bound = ix.args[size_t(b)].get()) {
          auto c = const_int(Arg{bound, nullptr, bound->loc});
          if (!c || (b == 2 && *c <= 0))
            fail(bound->loc, "with index tensors on two or more dims, kiln script takes slices with int constant bounds "
                             "(and a positive step) beside them");
          a.set(names[b], *c);
        }
      if (a.has("start") || a.has("end") || a.has("step")) x = op(OpId::Slice, {x}, std::move(a));
    }
    loc_ = e.loc;
    return composite::index_dims(lb, x, dims, idx);
  };
  return rest(0, x, 0, {}, {});
}

// ---------------------------------------------------------------- calls and attributes

Value* Lowerer::attribute(const Expr& e) {
  const Expr& base = *e.args[0];
  if (base.kind == ExprKind::Name && base.name == "torch" && !frame().env.count("torch")) {
    if (auto d = torch_dtype(e)) return dtype_value(constant(int64_t(*d)));  // `x.dtype == torch.float16`
    fail(e.loc, fmt::format("torch.{} is not supported as a value in kiln script", e.name));
  }
  if (base.kind == ExprKind::Name && base.name == "math" && m_->imported.count("math") && !frame().env.count("math")) {
    if (e.name == "pi") return constant(M_PI);
    if (e.name == "e") return constant(M_E);
    if (e.name == "inf") return constant(double(INFINITY));
    fail(e.loc, fmt::format("math.{} is not supported in kiln script", e.name));
  }
  if (const Object* o = static_object(base)) return object_attribute(*o, e.name, e.loc);
  if (const ModuleGlobal* g = module_attribute(e)) {  // helpers.CONST: named as the file writes it
    std::string dotted = base.name + "." + e.name;
    if (g->value.kind == Static::Kind::Function) fail(e.loc, fmt::format("function '{}' is not a value; call it", dotted));
    return static_value(g->value, dotted, e.loc);
  }
  // ClassName.attr: a class-level attribute of a class of the file, a constant
  if (base.kind == ExprKind::Name && !frame().env.count(base.name))
    for (const auto& c : m_->classes)
      if (c->name == base.name) {
        for (const auto& [name, value] : c->attrs)
          if (name == e.name) return expr(*value);
        fail(e.loc, fmt::format("class '{}' has no class attribute '{}'", c->name, e.name));
      }
  Value* x = expr(base);
  loc_ = e.loc;
  if (x->type().is_tensor())
    if (auto v = tensor_attribute(*this, x, e.name, e.loc)) return *v;
  if (packed_parts(x)) {
    if (auto v = packed_attribute(*this, x, e.name)) return *v;
    fail(e.loc, fmt::format("PackedSequence.{} is not available in kiln script (data, batch_sizes, sorted_indices and "
                            "unsorted_indices are)",
                            e.name));
  }
  if (x->type().kind == TypeKind::Tuple)
    if (auto v = namedtuple_field(x, e.name, e.loc)) return *v;
  fail(e.loc, fmt::format("{} has no attribute '{}' in kiln script", x->type().str(), e.name));
}

namespace {
// A function of torch.nn.utils.rnn as the file names it: a name it imported from there, `nn.utils.rnn.f` or
// `torch.nn.utils.rnn.f`; empty otherwise.
std::string rnn_utils_function(const Expr& fn, const FileAst& m, const std::map<std::string, Value*>& env) {
  if (fn.kind == ExprKind::Name) {
    auto it = m.rnn_utils_names.find(fn.name);
    return it != m.rnn_utils_names.end() && !env.count(fn.name) ? it->second : std::string();
  }
  if (fn.kind != ExprKind::Attribute) return "";
  const Expr& rnn = *fn.args[0];
  if (rnn.kind != ExprKind::Attribute || rnn.name != "rnn") return "";
  const Expr& utils = *rnn.args[0];
  if (utils.kind != ExprKind::Attribute || utils.name != "utils") return "";
  const Expr& nn = *utils.args[0];
  bool is_nn = nn.kind == ExprKind::Name ? m.nn_names.count(nn.name) && !env.count(nn.name)
                                         : nn.kind == ExprKind::Attribute && nn.name == "nn" &&
                                               nn.args[0]->kind == ExprKind::Name && nn.args[0]->name == "torch" &&
                                               m.imported.count("torch") && !env.count("torch");
  return is_nn ? fn.name : "";
}

// torch.nn.functional as the file imported it: `F.relu`, `nn.functional.relu`, `torch.nn.functional.relu`.
bool is_functional(const Expr& e, const FileAst& m) {
  if (e.kind == ExprKind::Name) return m.functional_names.count(e.name) != 0;
  if (e.kind != ExprKind::Attribute || e.name != "functional") return false;
  const Expr& b = *e.args[0];
  if (b.kind == ExprKind::Name) return m.nn_names.count(b.name) != 0;
  return b.kind == ExprKind::Attribute && b.name == "nn" && b.args[0]->kind == ExprKind::Name &&
         b.args[0]->name == "torch" && m.imported.count("torch");
}

// `nn.Transformer` / `torch.nn.Transformer` as the file imported torch.nn: the class whose static method
// generate_square_subsequent_mask a script calls on it
bool is_nn_transformer(const Expr& e, const FileAst& m, const std::map<std::string, Value*>& env) {
  if (e.kind != ExprKind::Attribute || e.name != "Transformer") return false;
  const Expr& b = *e.args[0];
  if (b.kind == ExprKind::Name) return m.nn_names.count(b.name) && !env.count(b.name);
  return b.kind == ExprKind::Attribute && b.name == "nn" && b.args[0]->kind == ExprKind::Name && b.args[0]->name == "torch" &&
         m.imported.count("torch") && !env.count("torch");
}
}  // namespace

// nn.Transformer.generate_square_subsequent_mask(sz), on the class, an nn.Transformer or a subclass's self
Value* Lowerer::square_subsequent_mask_call(const Expr& e) {
  if (e.args.size() != 2 || !e.keywords.empty()) fail(e.loc, "generate_square_subsequent_mask() takes one argument (sz)");
  Value* sz = expr(*e.args[1]);
  if (sz->type().kind != TypeKind::Int) fail(e.args[1]->loc, fmt::format("sz must be an int, got {}", sz->type().str()));
  return square_subsequent_mask_of(*this, sz);
}

Value* Lowerer::call(const Expr& e) {
  for (const Keyword& k : e.keywords)
    if (k.name.empty()) fail(k.loc, "**kwargs are not supported in kiln script");
  const Expr& fn = *e.args[0];
  if (const Object* o = static_object(fn)) return call_object(*o, e);
  const Object* owner = nullptr;
  std::string kept;
  if (const Static* f = kept_function(fn, &owner, &kept)) return call_function_value(*f, e, owner->file.get(), kept);
  if (std::string u = rnn_utils_function(fn, *m_, frame().env); !u.empty()) return call_rnn_utils(*this, u, e);
  if (is_data_parallel(fn)) return data_parallel(e);
  // `from torch.nn.functional import relu` then relu(x): the F call, as TorchScript reads it
  if (fn.kind == ExprKind::Name && !frame().env.count(fn.name))
    if (auto a = m_->aliases.find(fn.name); a != m_->aliases.end() && a->second.rfind("attr:torch.nn.functional:", 0) == 0)
      return call_builtin(*this, "F." + a->second.substr(a->second.rfind(':') + 1), e, nullptr);
  if (fn.kind == ExprKind::Attribute) {
    const Expr& base = *fn.args[0];
    if (const Object* o = static_object(base)) {
      if (o->layer == Layer::User) {
        if (const FunctionDef* m = o->def->method(fn.name)) {
          if (m->name == "__init__") fail(fn.loc, "__init__ cannot be called from a scripted method");
          return inline_call(*m, e, o);
        }
        if (fn.name == "generate_square_subsequent_mask" && o->def->root()->torch_base == "Transformer")
          return square_subsequent_mask_call(e);
        std::vector<std::string> names;
        for (const auto& m : o->def->methods) names.push_back(m->name);
        for (const auto& [k, v] : o->attrs) names.push_back(k);
        if (const Static* a = o->attr(fn.name); a && a->kind == Static::Kind::Function && a->fn)
          return call_function_value(*a, e, o->file.get(), fn.name);  // a lambda or function kept on self: inlined
        // `self.act = F.gelu` in __init__ (nn.TransformerEncoderLayer's activation): called as F.gelu is
        constexpr std::string_view kF = "torch.nn.functional.";
        if (const Static* a = o->attr(fn.name); a && a->kind == Static::Kind::Function && !a->fn && a->s.rfind(kF, 0) == 0)
          return call_builtin(*this, "F." + a->s.substr(kF.size()), e, nullptr);
        if (o->attr(fn.name))
          fail(fn.loc, fmt::format("'{}' is a {}, not callable", fn.name, o->attr(fn.name)->type_name()));
        fail(fn.loc, fmt::format("'{}' object has no attribute '{}'{}", o->cls, fn.name, did_you_mean(fn.name, names)));
      }
      if (fn.name == "forward") return call_object(*o, e);
      if (fn.name == "generate_square_subsequent_mask" && o->layer == Layer::Registered && o->cls == "Transformer")
        return square_subsequent_mask_call(e);
      fail(fn.loc, fmt::format("{}.{}() is not supported in kiln script; call the module itself", o->cls, fn.name));
    }
    if (fn.name == "generate_square_subsequent_mask" && is_nn_transformer(base, *m_, frame().env)) return square_subsequent_mask_call(e);
    if (!frame().env.count(base.kind == ExprKind::Name ? base.name : std::string()) && is_functional(base, *m_))
      return call_builtin(*this, "F." + fn.name, e, nullptr);
    if (base.kind == ExprKind::Name && base.name == "math" && m_->imported.count("math") && !frame().env.count("math")) {
      // math functions of constants fold now (python_math.h, the table __init__ reads); kiln has no number
      // math at run time but sqrt
      if (!e.keywords.empty()) fail(e.loc, fmt::format("math.{}() takes no keyword arguments", fn.name));
      std::vector<MathNumber> args;
      std::vector<Value*> values;
      bool constant_args = true;
      for (size_t i = 1; i < e.args.size(); ++i) {
        Value* v = expr(*e.args[i]);
        values.push_back(v);
        const AttrValue* c = const_attr(v);
        if (c && std::holds_alternative<double>(*c)) args.push_back(MathNumber::of_float(std::get<double>(*c)));
        else if (c && std::holds_alternative<int64_t>(*c)) args.push_back(MathNumber::of_int(std::get<int64_t>(*c)));
        else if (c && std::holds_alternative<bool>(*c)) args.push_back(MathNumber::of_bool(std::get<bool>(*c)));
        else constant_args = false;
      }
      if (!constant_args && fn.name == "sqrt" && values.size() == 1) {
        // a size known when the graph runs (nanoGPT's math.sqrt(k.size(-1))): x ** 0.5, as a float
        Value* v = values[0];
        if (v->type().kind != TypeKind::Int && v->type().kind != TypeKind::Float)
          fail(e.args[1]->loc, fmt::format("math.sqrt() takes a number, got {}", v->type().str()));
        loc_ = e.loc;
        Value* f = v->type().kind == TypeKind::Float ? v : prim(Prim::ToFloat, {v}, Type::scalar(TypeKind::Float));
        check(prim(Prim::NumGe, {f, constant(0.0)}, Type::scalar(TypeKind::Bool)), "ValueError: math domain error");
        return prim(Prim::NumPow, {f, constant(0.5)}, Type::scalar(TypeKind::Float));
      }
      if (!constant_args)
        fail(e.loc, fmt::format("math.{}() needs constant arguments in kiln script (literals, module attributes or math "
                                "of them); only math.sqrt also takes a number known when the graph runs", fn.name));
      std::optional<MathNumber> r = python_math(fn.name, args, [&](const std::string& m) { fail(e.loc, m); });
      if (!r) fail(fn.loc, fmt::format("math.{} is not supported in kiln script", fn.name));
      if (r->kind == MathNumber::Kind::Int) return constant(r->i);
      if (r->kind == MathNumber::Kind::Bool) return constant(r->i != 0);
      return constant(r->f);
    }
    if (base.kind == ExprKind::Name && base.name == "torch" && !frame().env.count("torch")) {
      if (!m_->imported.count("torch")) fail(base.loc, "name 'torch' is not defined (add `import torch`)");
      if (fn.name == "_assert") {
        if (e.args.size() != 3 || !e.keywords.empty()) fail(e.loc, "torch._assert() takes a condition and a message");
        check_assert(*e.args[1], e.args[2].get(), "AssertionError", e.loc);
        return g_->insert_none();
      }
      return call_builtin(*this, "torch." + fn.name, e, nullptr);
    }
    if (is_scripting_call(e)) return constant(true);
    if (is_jit_annotate(e) && !frame().env.count("torch") && !frame().env.count("jit")) return jit_annotate(e);
    if (base.kind == ExprKind::Attribute && base.args[0]->kind == ExprKind::Name && base.args[0]->name == "torch" &&
        base.name == "linalg" && !frame().env.count("torch"))
      return call_builtin(*this, "torch.linalg." + fn.name, e, nullptr);
    if (std::string q = dotted(fn); !frame().env.count("torch"))
      if (std::optional<DeviceQuery> d = device_query(q)) {
        // torch.cuda.is_available(): known now, so the branches it picks are chosen while lowering
        if (e.args.size() != 1 || !e.keywords.empty()) fail(e.loc, fmt::format("{}() takes no arguments", q));
        return d->is_int ? constant(d->value) : constant(d->value != 0);
      }
    if (base.kind == ExprKind::Attribute && base.args[0]->kind == ExprKind::Name && base.args[0]->name == "torch")
      fail(fn.loc, fmt::format("torch.{}.{} is not supported in kiln script; only torch.<function> calls are",
                               base.name, fn.name));
    if (base.kind == ExprKind::Name && !frame().env.count(base.name) && fn.name == "warn") {
      // warnings.warn: a Python warning, not part of what the graph computes (as __init__ treats it)
      auto a = m_->aliases.find(base.name);
      if (a != m_->aliases.end() && a->second == "warnings") return g_->insert_none();
    }
    if (const ModuleGlobal* g = module_attribute(fn)) return call_function_value(g->value, e, g->home.get(), base.name + "." + fn.name);
    if (base.kind == ExprKind::Name && !frame().env.count(base.name))
      if (const std::string* why = m_->why_unavailable(base.name)) fail(base.loc, *why);
    if (base.kind == ExprKind::Name && (base.name == "F" || base.name == "nn" || base.name == "np"))
      if (!frame().env.count(base.name))
        fail(base.loc, fmt::format("'{}' is not available in kiln script; use torch.<function>", base.name));
    if (fn.name == "copy" && e.args.size() == 1 && e.keywords.empty()) {
      // xs.copy(): a list of its own (a new value, so a store into it does not rebind xs); swin's
      // `shift_size = shift_size.copy()` before `shift_size[0] = 0`
      Value* xs = expr(base);
      if (xs->type().kind == TypeKind::List) {
        loc_ = e.loc;
        return prim(Prim::ListSlice, {xs, constant(int64_t(0)), constant(INT64_MAX)}, xs->type());
      }
      fail(fn.loc, fmt::format("{} has no method 'copy' in kiln script", xs->type().str()));
    }
    if (fn.name == "append" && base.kind == ExprKind::Name && frame().env.count(base.name) &&
        frame().env.at(base.name)->type().kind == TypeKind::List) {
      // xs.append(v) rebinds xs to xs + [v]: the list is a value in the graph, so a loop carries it.
      Value* xs = frame().env.at(base.name);
      if (e.args.size() != 2 || !e.keywords.empty()) fail(e.loc, "list.append() takes one argument");
      Value* v = expr(*e.args[1]);
      const Type& et = xs->type().elems[0];
      if (!same_type(v->type(), et))
        v = coerce(v, et, e.args[1]->loc, fmt::format("append to {}", xs->type().str()));
      loc_ = e.loc;
      if (base.kind == ExprKind::Name) check_list_shared(xs, base.name, base.loc);
      Value* one = prim(Prim::ListConstruct, {v}, xs->type());
      Value* now = prim(Prim::ListAdd, {xs, one}, xs->type());
      for (auto& [k, x] : frame().env)  // `ys = xs` names the same list: it sees the append
        if (k[0] != '$' && x == xs) x = now;
      assign(base, now, base.loc);
      return g_->insert_none();
    }
    Value* self = expr(base);
    loc_ = e.loc;
    if (!self->type().is_tensor())
      fail(fn.loc, fmt::format("{} has no method '{}' in kiln script", self->type().str(), fn.name));
    if (fn.name.size() > 1 && fn.name.back() == '_' && fn.name[fn.name.size() - 2] != '_')
      return inplace_method(e, self, fn.name);
    return call_builtin(*this, fn.name, e, self);
  }
  if (fn.kind != ExprKind::Name) fail(fn.loc, "only functions of this file, torch.<function> and tensor methods can be called");
  for (const auto& f : m_->functions)
    if (f->name == fn.name) return inline_call(*f, e);
  if (!frame().env.count(fn.name))
    if (const ModuleGlobal* g = module_global(fn.name, fn.loc)) return call_function_value(g->value, e, g->home.get(), fn.name);
  if (const NamedTupleDef* def = m_->namedtuple(fn.name); def && !frame().env.count(fn.name))
    return construct_namedtuple(*def, e);
  if (const std::string* why = m_->why_unavailable(fn.name); why && !frame().env.count(fn.name)) fail(fn.loc, *why);
  if (fn.name == "next" && !frame().env.count("next") && e.args.size() == 2 && e.keywords.empty()) {
    // next(self.parameters()) (word_lm's init_hidden makes its state with the first parameter's new_zeros)
    const Expr& it = *e.args[1];
    if (it.kind == ExprKind::Call && it.args.size() == 1 && it.args[0]->kind == ExprKind::Attribute &&
        it.args[0]->name == "parameters")
      if (const Object* o = static_object(*it.args[0]->args[0])) {
        auto params = o->module->named_parameters();
        if (params.empty()) fail(e.loc, fmt::format("StopIteration: {} has no parameters", o->cls));
        const auto& [name, t] = params.front();
        return tensor_of(Static::of_tensor(t, true), o->path.empty() ? name : o->path + "." + name);
      }
    fail(e.loc, "next() takes self.parameters() (or a submodule's) in kiln script");
  }
  if (fn.name == "print" && !frame().env.count("print")) {
    // A side effect kept by dead-code elimination; printed as Python prints (sep and end as attributes).
    Node* n = g_->create(Prim::Print, 0);
    for (const Keyword& k : e.keywords) {
      if (k.name != "sep" && k.name != "end")
        fail(k.loc, fmt::format("print() keyword '{}' is not supported in kiln script (sep and end are)", k.name));
      std::optional<std::string> text = const_str(Arg{k.value.get(), nullptr, k.value->loc});
      if (!text) fail(k.value->loc, fmt::format("print() {} must be a string constant in kiln script", k.name));
      n->attrs().set(k.name, *text);
    }
    for (size_t i = 1; i < e.args.size(); ++i) {
      if (e.args[i]->kind == ExprKind::Starred) fail(e.args[i]->loc, "starred arguments are only supported in __init__");
      n->add_input(expr(*e.args[i]));
    }
    loc_ = e.loc;
    emit(n);
    return g_->insert_none();
  }
  return call_builtin(*this, fn.name, e, nullptr);
}

}  // namespace kiln::script
