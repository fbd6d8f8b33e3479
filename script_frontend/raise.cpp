// `raise E(msg)` in lowered code, as TorchScript lowers it: a prim::raise that fails the graph with
// Python's words when the path is taken at run time. The block ends there (what follows is unreachable),
// and an `if` branch that raises counts as one that exits, so its merge takes the other branch's values.
// A condition known while lowering (`p < 0.0` with p a constant) still lowers both branches; the raise
// then sits on a path the interpreter never takes.
#include <fmt/format.h>

#include "script_frontend/lowerer.h"

namespace kiln::script {

using ir::Node;
using ir::Prim;

namespace {

const AttrValue* constant_of(const Value* v) {
  const Node* n = v->node();
  if (n->prim() != Prim::Constant || n->tensor().defined()) return nullptr;
  for (const auto& [k, a] : n->attrs().items())
    if (k == "value") return &a;
  return nullptr;
}

// Python's str() of a constant: 0.2 → "0.2", 1.0 → "1.0", True → "True".
std::optional<std::string> python_str(const AttrValue& a) {
  if (const auto* i = std::get_if<int64_t>(&a)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&a)) return std::string(*b ? "True" : "False");
  if (const auto* s = std::get_if<std::string>(&a)) return *s;
  if (const auto* d = std::get_if<double>(&a)) {
    std::string t = fmt::format("{}", *d);
    if (t.find_first_of(".eni") == std::string::npos) t += ".0";
    return t;
  }
  return std::nullopt;
}

}  // namespace

// The exception's text: a string literal, or an f-string whose fields are constants while lowering (a
// module's configuration, an inlined argument). A field known only at run time is shown by its name
// between braces, since kiln graphs do not format strings.
std::string Lowerer::raise_message(const Expr& e) {
  if (e.kind == ExprKind::String) return e.name;
  if (e.kind != ExprKind::FString) fail(e.loc, "the message of a raise in kiln script is a string or an f-string");
  std::string out;
  for (const ExprPtr& part : e.args) {
    if (part->kind == ExprKind::String) {
      out += part->name;
      continue;
    }
    const Expr& field = *part->args[0];
    std::optional<std::string> text;
    if (part->args.size() < 2 || !part->args[1]) {
      Value* v = expr(field);
      if (const AttrValue* a = constant_of(v)) text = python_str(*a);
      if (part->op == "r" && text && std::holds_alternative<std::string>(*constant_of(v))) text = "'" + *text + "'";
    }
    out += text ? *text : "{" + std::string(field.kind == ExprKind::Name ? field.name : "...") + "}";
  }
  return out;
}

void Lowerer::raise_stmt(const Stmt& s) {
  std::string text = "Exception";
  if (s.value) {
    const Expr& ex = *s.value;
    const Expr* callee = ex.kind == ExprKind::Call ? ex.args[0].get() : &ex;
    if (callee->kind != ExprKind::Name)
      fail(ex.loc, "kiln script raises an exception named by a builtin class: raise ValueError(\"...\")");
    text = callee->name;
    if (ex.kind == ExprKind::Call) {
      if (ex.args.size() > 2 || !ex.keywords.empty())
        fail(ex.loc, fmt::format("{}() in a raise takes one message in kiln script", callee->name));
      if (ex.args.size() == 2) text += ": " + raise_message(*ex.args[1]);
    }
  }
  loc_ = s.loc;
  Node* r = g_->create(Prim::Raise, 0);
  r->attrs().set("message", fmt::format("{}:{}: {}", src_->name, s.loc.line, text));
  emit(r);
}

// torch._assert(cond, msg) in lowered code (vit's image size checks): assert's prim::If + prim::raise, with
// raise's message formatting.
Value* Lowerer::torch_assert(const Expr& call) {
  if (call.args.size() != 3 || !call.keywords.empty()) fail(call.loc, "torch._assert() takes a condition and a message");
  Value* c = to_condition(expr(*call.args[1]), call.args[1]->loc);
  std::string msg = "AssertionError: " + raise_message(*call.args[2]);
  loc_ = call.loc;
  Node* n = emit(g_->create(Prim::If, 0));
  n->add_input(c);
  n->add_block();
  ir::Block* no = n->add_block();
  {
    ir::InsertPointGuard guard(*g_);
    g_->set_insert_point(no);
    Node* r = g_->create(Prim::Raise, 0);
    r->attrs().set("message", fmt::format("{}:{}: {}", src_->name, call.loc.line, msg));
    emit(r);
  }
  return g_->insert_none();
}

}  // namespace kiln::script
