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

// The text of a raise or an assert: a string literal, or an f-string (nanoGPT's f"Cannot forward sequence of
// length {t}, ..."). prim::raise holds one message fixed when lowering, so fields known then (constants,
// module attributes, inlined arguments) are written as Python's str() would, and the others as the name they
// read, in braces, since kiln graphs do not format strings. Nothing is emitted.
std::string Lowerer::raise_message(const Expr& e) {
  // a field: Python's str() where it is known now (no format spec applied), else the name it reads in braces
  auto field_text = [&](const Expr& field, bool repr, bool has_spec) {
    std::optional<std::string> text;
    if (!has_spec) {
      Arg a{&field, nullptr, field.loc};
      if (auto i = const_int(a)) text = python_str(AttrValue(*i));
      else if (auto d = const_float(a)) text = python_str(AttrValue(*d));
      else if (auto str = const_str(a)) text = repr ? "'" + *str + "'" : *str;
    }
    if (!text) {
      std::string name;
      for (const Expr* x = &field; x; x = x->kind == ExprKind::Attribute ? x->args[0].get() : nullptr) {
        if (x->kind != ExprKind::Attribute && x->kind != ExprKind::Name) {
          name = "...";
          break;
        }
        name = name.empty() ? x->name : x->name + "." + name;
      }
      text = "{" + name + "}";
    }
    return *text;
  };
  if (e.kind == ExprKind::String) return e.name;
  if (e.kind == ExprKind::Call && e.args[0]->kind == ExprKind::Attribute && e.args[0]->name == "format" &&
      e.args[0]->args[0]->kind == ExprKind::String && e.keywords.empty()) {
    // "... {} ...".format(a, b) (maxvit's torch._assert message): {} and {N} take the positional arguments
    const std::string& f = e.args[0]->args[0]->name;
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      if ((f[i] == '{' || f[i] == '}') && i + 1 < f.size() && f[i + 1] == f[i]) {
        out += f[i++];
        continue;
      }
      if (f[i] != '{') {
        out += f[i];
        continue;
      }
      size_t close = f.find('}', i);
      std::string key = close == std::string::npos ? "x" : f.substr(i + 1, close - i - 1);
      bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
      if (!key.empty() && !digits) fail(e.loc, "str.format() in a raise or an assert message takes {} and {N} fields in kiln script");
      size_t k = digits ? size_t(std::stoul(key)) : next++;
      if (k + 1 >= e.args.size()) fail(e.loc, fmt::format("str.format(): replacement index {} out of range", k));
      out += field_text(*e.args[k + 1], false, false);
      i = close;
    }
    return out;
  }
  if (e.kind != ExprKind::FString)
    fail(e.loc, "the message of a raise or an assert in kiln script is a string, an f-string or \"...\".format(...)");
  std::string out;
  for (const ExprPtr& part : e.args) {
    if (part->kind == ExprKind::String) {
      out += part->name;
      continue;
    }
    out += field_text(*part->args[0], part->conversion == "r", part->args.size() >= 2 && part->args[1]);
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

}  // namespace kiln::script
