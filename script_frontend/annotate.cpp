// A type given to a value where TorchScript would infer another, or none: `x: List[int] = []` and
// `torch.jit.annotate(List[int], [])` (the spelling of files written before variable annotations). An empty
// list or dict takes its type from the annotation; any other value is coerced to it, as TorchScript checks it.
#include <fmt/format.h>

#include "script_frontend/lowerer.h"
#include "script_frontend/parser.h"

namespace kiln::script {

using ir::Prim;

bool is_jit_annotate(const Expr& call) {
  if (call.kind != ExprKind::Call) return false;
  const Expr& fn = *call.args[0];
  if (fn.kind != ExprKind::Attribute || fn.name != "annotate") return false;
  const Expr& jit = *fn.args[0];
  if (jit.kind == ExprKind::Name) return jit.name == "jit";  // from torch import jit
  return jit.kind == ExprKind::Attribute && jit.name == "jit" && jit.args[0]->kind == ExprKind::Name && jit.args[0]->name == "torch";
}

Value* Lowerer::annotated(const TypeExpr& t, const Expr& value, const std::string& what) {
  if (t.name == "Dict" || t.name == "dict") {
    Value* d = expr(value);
    if (!dict_keys(d)) fail(value.loc, fmt::format("{} is a dict, got {}", what, d->type().str()));
    return d;
  }
  Type want = type_from_annotation(*src_, t, *m_);
  Value* v = nullptr;
  if (value.kind == ExprKind::List && value.args.empty() && want.kind == TypeKind::List)
    v = prim(Prim::ListConstruct, {}, want);
  else
    v = coerce(expr(value), want, value.loc, what);
  note_namedtuple(v, t);
  return v;
}

Value* Lowerer::jit_annotate(const Expr& call) {
  if (call.args.size() != 3 || !call.keywords.empty())
    fail(call.loc, "torch.jit.annotate() takes a type and a value");
  return annotated(annotation_type(*call.args[1]), *call.args[2], "torch.jit.annotate()");
}

}  // namespace kiln::script
