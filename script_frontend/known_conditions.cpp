// Conditions on constants folded while lowering: `if not training or p == 0.0: return input` in
// torchvision's stochastic_depth (training and p are the module's configuration, inlined as constants)
// lowers its taken branch only, so the code it makes unreachable (bernoulli_ on a training path) and a
// `raise` on a path never taken are not lowered, as TorchScript's constant propagation removes them.
// Read from the expression, without emitting nodes; nullopt when any part is known only at run time.
#include <functional>
#include <variant>

#include "script_frontend/lowerer.h"

namespace kiln::script {

namespace {

using Known = std::variant<bool, int64_t, double, std::string>;

std::optional<double> number(const Known& k) {
  if (const auto* b = std::get_if<bool>(&k)) return double(*b);
  if (const auto* i = std::get_if<int64_t>(&k)) return double(*i);
  if (const auto* d = std::get_if<double>(&k)) return *d;
  return std::nullopt;
}

std::optional<Known> of_attr(const AttrValue& a) {
  if (const auto* b = std::get_if<bool>(&a)) return Known(*b);
  if (const auto* i = std::get_if<int64_t>(&a)) return Known(*i);
  if (const auto* d = std::get_if<double>(&a)) return Known(*d);
  if (const auto* s = std::get_if<std::string>(&a)) return Known(*s);
  return std::nullopt;
}

}  // namespace

std::optional<bool> Lowerer::known_condition(const Expr& test) {
  if (frames_.empty()) return std::nullopt;
  std::function<std::optional<Known>(const Expr&)> value = [&](const Expr& e) -> std::optional<Known> {
    switch (e.kind) {
      case ExprKind::Bool: return Known(e.int_value != 0);
      case ExprKind::Int: return Known(e.int_value);
      case ExprKind::Float: return Known(e.float_value);
      case ExprKind::String: return Known(e.name);
      case ExprKind::Name: {
        auto it = frame().env.find(e.name);
        if (it == frame().env.end()) return std::nullopt;
        const ir::Node* n = it->second->node();

        if (n->prim() != ir::Prim::Constant || n->tensor().defined()) return std::nullopt;
        for (const auto& [k, a] : n->attrs().items())
          if (k == "value") return of_attr(a);
        return std::nullopt;
      }
      case ExprKind::Unary: {
        auto v = value(*e.args[0]);
        if (!v) return std::nullopt;
        auto x = number(*v);
        if (e.op == "not") {
          if (const auto* s = std::get_if<std::string>(&*v)) return Known(s->empty());
          return Known(*x == 0);
        }
        if (e.op == "-" && x) {
          if (std::holds_alternative<double>(*v)) return Known(-*x);
          return Known(-int64_t(*x));
        }
        return std::nullopt;
      }
      case ExprKind::BoolOp: {
        bool is_and = e.op == "and";
        for (const auto& a : e.args) {
          auto v = value(*a);
          if (!v) return std::nullopt;
          auto x = number(*v);
          if (!x) return std::nullopt;
          if ((*x != 0) != is_and) return Known(*x != 0);
        }
        return Known(is_and);
      }
      case ExprKind::Compare: {
        if (e.ops.size() != 1) return std::nullopt;
        const std::string& op = e.ops[0];
        // `x is None` on a value that cannot be None, or is always None (a method called with None for an
        // unannotated parameter): the branch the call takes, as TorchScript's refinement of NoneType
        if ((op == "is" || op == "is not") && e.args[1]->kind == ExprKind::None && e.args[0]->kind == ExprKind::Name) {
          auto it = frame().env.find(e.args[0]->name);
          if (it == frame().env.end()) return std::nullopt;
          TypeKind k = it->second->type().kind;
          if (k == TypeKind::Optional) return std::nullopt;
          return Known((k == TypeKind::None) == (op == "is"));
        }
        auto a = value(*e.args[0]);
        if (!a) return std::nullopt;
        const Expr& seq = *e.args[1];
        if ((op == "in" || op == "not in") && (seq.kind == ExprKind::List || seq.kind == ExprKind::Tuple)) {
          // `mode not in ["batch", "row"]`: a list written out, every element a constant
          bool found = false;
          for (const ExprPtr& x : seq.args) {
            auto v = value(*x);
            if (!v) return std::nullopt;
            auto p = number(*a), q = number(*v);
            found = found || (p && q ? *p == *q : *a == *v);
          }
          return Known(found == (op == "in"));
        }
        auto b = value(*e.args[1]);
        if (!b) return std::nullopt;
        auto x = number(*a), y = number(*b);
        if (x && y) {
          if (op == "==") return Known(*x == *y);
          if (op == "!=") return Known(*x != *y);
          if (op == "<") return Known(*x < *y);
          if (op == "<=") return Known(*x <= *y);
          if (op == ">") return Known(*x > *y);
          if (op == ">=") return Known(*x >= *y);
          return std::nullopt;
        }
        const auto* s = std::get_if<std::string>(&*a);
        const auto* t = std::get_if<std::string>(&*b);
        if (s && t && (op == "==" || op == "!=")) return Known((*s == *t) == (op == "=="));
        return std::nullopt;
      }
      default: return std::nullopt;
    }
  };
  auto v = value(test);
  if (!v) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&*v)) return !s->empty();
  return *number(*v) != 0;
}

}  // namespace kiln::script
