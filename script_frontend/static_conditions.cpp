// Conditions decided while lowering, as TorchScript's constant propagation and NoneType refinement decide
// them: only the branch taken is lowered, so the other may not even type-check for this module
// (`self.downsample is not None`), and a `raise` or a training-only bernoulli_ on a path never taken is
// not lowered (torchvision's stochastic_depth: `if not training or p == 0.0: return input`, with training
// and p inlined constants). One evaluator serves if statements, ternaries and returns_at_end, so what is
// known is the same wherever a condition is read. Read from the expression, without emitting nodes;
// nullopt when any part that matters is known only at run time.
#include <variant>

#include "script_frontend/lowerer.h"
#include "script_frontend/torch_devices.h"

namespace kiln::script {

namespace {

using Kind = Static::Kind;

std::optional<double> number(const KnownValue& k) {
  if (const auto* b = std::get_if<bool>(&k)) return double(*b);
  if (const auto* i = std::get_if<int64_t>(&k)) return double(*i);
  if (const auto* d = std::get_if<double>(&k)) return *d;
  return std::nullopt;
}

bool truth(const KnownValue& k) {
  if (const auto* s = std::get_if<std::string>(&k)) return !s->empty();
  return *number(k) != 0;
}

// An expression that only reads names and attributes (no call), so skipping its evaluation changes nothing.
bool reads_only(const Expr& e) {
  if (e.kind == ExprKind::Name) return true;
  if (e.kind == ExprKind::Attribute) return reads_only(*e.args[0]);
  return false;
}

}  // namespace

bool is_scripting_call(const Expr& e) {
  if (e.kind != ExprKind::Call || e.args.size() != 1 || !e.keywords.empty()) return false;
  const Expr& fn = *e.args[0];
  if (fn.kind != ExprKind::Attribute || fn.name != "is_scripting") return false;
  const Expr& jit = *fn.args[0];
  return jit.kind == ExprKind::Attribute && jit.name == "jit" && jit.args[0]->kind == ExprKind::Name && jit.args[0]->name == "torch";
}

std::optional<KnownValue> Lowerer::known_value(const Expr& e) {
  if (frames_.empty()) return std::nullopt;
  switch (e.kind) {
    case ExprKind::Unary: {
      if (e.op == PyOp::Not) {
        if (auto v = static_condition(*e.args[0])) return KnownValue(!*v);
        return std::nullopt;
      }
      auto v = known_value(*e.args[0]);
      auto x = v ? number(*v) : std::nullopt;
      if (!x || (e.op != PyOp::Neg && e.op != PyOp::Pos)) return std::nullopt;
      double sign = e.op == PyOp::Neg ? -1 : 1;
      if (std::holds_alternative<double>(*v)) return KnownValue(sign * *x);
      if (sign < 0 && int64_t(*x) == INT64_MIN) return std::nullopt;
      return KnownValue(int64_t(sign) * int64_t(*x));
    }
    case ExprKind::BoolOp: {
      // Python's value: the first operand that decides (falsy for `and`, truthy for `or`), else the last
      bool is_and = e.op == PyOp::And;
      std::optional<KnownValue> v;
      for (const auto& a : e.args) {
        v = known_value(*a);
        if (!v) return std::nullopt;
        if (truth(*v) != is_and) return v;
      }
      return v;
    }
    case ExprKind::Compare: {
      if (auto c = static_condition(e)) return KnownValue(*c);
      return std::nullopt;
    }
    case ExprKind::Call: {
      if (is_scripting_call(e) && !frame().env.count("torch")) return KnownValue(true);
      if (auto c = isinstance_known(e)) return KnownValue(*c);
      // torch.cuda.is_available(), torch.cuda.device_count(): what kiln's runtime sees now
      if (std::optional<DeviceQuery> d = e.args.size() == 1 && !frame().env.count("torch") ? device_query(dotted(*e.args[0])) : std::nullopt)
        return d->is_int ? KnownValue(d->value) : KnownValue(d->value != 0);
      return std::nullopt;
    }
    default: break;
  }
  Arg a{&e, nullptr, e.loc};
  if (auto b = const_bool(a)) return KnownValue(*b);
  if (auto i = const_int(a)) return KnownValue(*i);
  if (auto d = const_float(a)) return KnownValue(*d);
  if (auto s = const_str(a)) return KnownValue(*s);
  return std::nullopt;
}

std::optional<bool> Lowerer::static_condition(const Expr& test) {
  // torch.jit.is_scripting() is True in lowered code, as under torch.jit.script: the eager branch it
  // guards (often a call of a @torch.jit.unused method) is never lowered.
  if (!frames_.empty() && is_scripting_call(test) && !frame().env.count("torch")) return true;
  if (auto known = isinstance_known(test)) return known;
  switch (test.kind) {
    case ExprKind::BoolOp: {
      // Decided when one operand decides it (False for `and`, True for `or`) and the operands before it
      // are known or only read names and attributes, or when every operand is known: DCGAN's
      // `input.is_cuda and self.ngpu > 1` with one GPU is False whatever the tensor, and its data_parallel
      // branch is not lowered; densenet's `self.memory_efficient and self.any_requires_grad(xs)` is False
      // for memory_efficient=False, as Python's short circuit gives, since the deciding operand comes first.
      bool is_and = test.op == PyOp::And;
      bool pure = true;  // every unknown operand before this one only reads names and attributes
      bool all_known = true;
      for (const auto& a : test.args) {
        auto v = static_condition(*a);
        if (!v) {
          pure = pure && reads_only(*a);
          all_known = false;
          continue;
        }
        if (*v != is_and) {
          if (pure) return *v;
          return std::nullopt;
        }
      }
      if (all_known) return is_and;
      return std::nullopt;
    }
    case ExprKind::Compare: {
      if (test.ops.size() != 1) return std::nullopt;
      PyOp op = test.ops[0];
      if (op == PyOp::Is || op == PyOp::IsNot) return none_test(test);
      auto a = known_value(*test.args[0]);
      if (!a) return std::nullopt;
      const Expr& seq = *test.args[1];
      if (op == PyOp::In || op == PyOp::NotIn) {
        // `mode not in ["batch", "row"]`: a list written out, every element a constant
        if (seq.kind != ExprKind::List && seq.kind != ExprKind::Tuple) return std::nullopt;
        bool found = false;
        for (const ExprPtr& x : seq.args) {
          auto v = known_value(*x);
          if (!v) return std::nullopt;
          auto p = number(*a), q = number(*v);
          found = found || (p && q ? *p == *q : *a == *v);
        }
        return found == (op == PyOp::In);
      }
      auto b = known_value(seq);
      if (!b) return std::nullopt;
      auto x = number(*a), y = number(*b);
      if (x && y) {
        switch (op) {
          case PyOp::Eq: return *x == *y;
          case PyOp::Ne: return *x != *y;
          case PyOp::Lt: return *x < *y;
          case PyOp::Le: return *x <= *y;
          case PyOp::Gt: return *x > *y;
          case PyOp::Ge: return *x >= *y;
          case PyOp::Add: case PyOp::Sub: case PyOp::Mul: case PyOp::Div: case PyOp::FloorDiv: case PyOp::Mod:
          case PyOp::Pow: case PyOp::MatMul: case PyOp::LShift: case PyOp::RShift: case PyOp::BitAnd:
          case PyOp::BitOr: case PyOp::BitXor: case PyOp::Pos: case PyOp::Neg: case PyOp::Not: case PyOp::Invert:
          case PyOp::And: case PyOp::Or: case PyOp::Is: case PyOp::IsNot: case PyOp::In: case PyOp::NotIn:
            return std::nullopt;
        }
        return std::nullopt;
      }
      const auto* s = std::get_if<std::string>(&*a);
      const auto* t = std::get_if<std::string>(&*b);
      if (s && t && (op == PyOp::Eq || op == PyOp::Ne)) return (*s == *t) == (op == PyOp::Eq);
      return std::nullopt;
    }
    case ExprKind::Attribute: {
      // a submodule is truthy; an attribute set to None is falsy
      if (const Object* o = static_object(*test.args[0]))
        if (const Static* a = o->attr(test.name)) {
          if (a->kind == Kind::None) return false;
          if (a->kind == Kind::Module) return true;
        }
      break;
    }
    default: break;
  }
  if (auto v = known_value(test)) return truth(*v);
  return std::nullopt;
}

// `x is None` / `x is not None`, when x's None-ness is known: a submodule or a module's attribute set to
// None, or a name whose type cannot be None or is always None (a method called with None for an
// unannotated parameter), as TorchScript's refinement of NoneType.
std::optional<bool> Lowerer::none_test(const Expr& test) {
  bool is = test.ops[0] == PyOp::Is;
  const Expr* side = test.args[1]->kind == ExprKind::None ? test.args[0].get()
                     : test.args[0]->kind == ExprKind::None ? test.args[1].get() : nullptr;
  if (!side) return std::nullopt;
  if (static_object(*side)) return !is;
  if (side->kind == ExprKind::Attribute)
    if (const Object* o = static_object(*side->args[0]))
      if (const Static* a = o->attr(side->name)) return is == (a->kind == Kind::None);
  if (side->kind != ExprKind::Name || frames_.empty()) return std::nullopt;
  auto it = frame().env.find(side->name);
  if (it == frame().env.end()) return std::nullopt;
  TypeKind k = it->second->type().kind;
  if (k == TypeKind::Optional) return std::nullopt;
  return is == (k == TypeKind::None);
}

}  // namespace kiln::script
