// isinstance(x, T) in lowered code is decided while lowering, as TorchScript does: every value has one
// static type there. An `if` on it lowers the matching branch only, so a method with overloads
// (densenet's forward on a Tensor or a List[Tensor]) types each inlined call for the caller's argument.
#include <fmt/format.h>

#include "script_frontend/lowerer.h"

namespace kiln::script {

namespace {

// Whether a value of type t is an instance of the class the expression names.
std::optional<bool> matches(const Type& t, const Expr& cls, const FileAst& m) {
  if (cls.kind == ExprKind::Tuple) {
    bool any = false;
    for (const ExprPtr& c : cls.args) {
      auto r = matches(t, *c, m);
      if (!r) return std::nullopt;
      any = any || *r;
    }
    return any;
  }
  std::string name;
  if (cls.kind == ExprKind::Name) name = cls.name;
  else if (cls.kind == ExprKind::Attribute && cls.args[0]->kind == ExprKind::Name && cls.args[0]->name == "torch")
    name = "torch." + cls.name;
  else return std::nullopt;
  if (name == "torch.Tensor" || (name == "Tensor" && m.imported.count("Tensor"))) return t.is_tensor();
  if (name == "int") return t.kind == TypeKind::Int;
  if (name == "float") return t.kind == TypeKind::Float;
  if (name == "bool") return t.kind == TypeKind::Bool;
  if (name == "str") return t.kind == TypeKind::Str;
  if (name == "list" || name == "List") return t.kind == TypeKind::List;
  if (name == "tuple" || name == "Tuple") return t.kind == TypeKind::Tuple;
  return std::nullopt;
}

}  // namespace

std::optional<bool> Lowerer::isinstance_known(const Expr& call) {
  if (call.kind != ExprKind::Call || call.args[0]->kind != ExprKind::Name || call.args[0]->name != "isinstance" ||
      frames_.empty() || frame().env.count("isinstance"))
    return std::nullopt;
  if (call.args.size() != 3 || !call.keywords.empty()) fail(call.loc, "isinstance() takes a value and a type");
  if (static_object(*call.args[1])) return false;  // a module is none of the types lowered code names
  Value* v = expr(*call.args[1]);
  auto r = matches(v->type(), *call.args[2], *m_);
  if (!r)
    fail(call.args[2]->loc, "isinstance() in kiln script tests for Tensor, int, float, bool, str, list or tuple (or a "
                            "tuple of them)");
  return r;
}

}  // namespace kiln::script
