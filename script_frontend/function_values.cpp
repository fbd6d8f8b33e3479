// Lambdas and functions that __init__ keeps in a list, tuple or dict on self (`self.post = [lambda x: ..., ...]`,
// `self.scores = {"prob": lambda x: torch.sigmoid(x), ...}`): TorchScript keeps none, kiln picks one while lowering
// (a constant index or key, or each in turn in a for over the list) and inlines it as a lambda kept on self.
#include <fmt/format.h>

#include "script_frontend/lowerer.h"

namespace kiln::script {

namespace {

using Kind = Static::Kind;

bool is_function(const Static& v) { return v.kind == Kind::Function && v.fn; }

// self.NAME (or a submodule's) holding a list, tuple or dict with a function among its values
const Static* kept_sequence(Lowerer& L, const Expr& e, const Object** owner) {
  if (e.kind != ExprKind::Attribute) return nullptr;
  const Object* o = L.static_object(*e.args[0]);
  if (!o || o->layer != Layer::User) return nullptr;
  const Static* v = o->attr(e.name);
  if (!v || (v->kind != Kind::List && v->kind != Kind::Tuple && v->kind != Kind::Dict)) return nullptr;
  bool any = false;
  for (const Static& x : v->elems) any = any || is_function(v->kind == Kind::Dict ? x.elems[1] : x);
  if (!any) return nullptr;
  *owner = o;
  return v;
}

}  // namespace

const Static* Lowerer::kept_function(const Expr& callee, const Object** owner, std::string* name) {
  if (callee.kind == ExprKind::Name) {
    if (frame().env.count(callee.name)) return nullptr;
    auto it = frame().functions.find(callee.name);
    if (it == frame().functions.end()) return nullptr;
    *owner = it->second.second;
    *name = callee.name;
    return it->second.first;
  }
  if (callee.kind != ExprKind::Subscript || callee.args.size() != 2) return nullptr;
  const Static* seq = kept_sequence(*this, *callee.args[0], owner);
  if (!seq) return nullptr;
  const Expr& key = *callee.args[1];
  const std::string& attr = callee.args[0]->name;
  const Static* picked = nullptr;
  if (seq->kind == Kind::Dict) {
    std::optional<std::string> k = const_str(Arg{&key, nullptr, key.loc});
    if (!k) fail(key.loc, fmt::format("'{}' is a dict of functions: its key must be a string known when lowering (a constant "
                                      "or a string attribute of the module)", attr));
    for (const Static& kv : seq->elems)
      if (kv.elems[0].kind == Kind::Str && kv.elems[0].s == *k) picked = &kv.elems[1];
    if (!picked) fail(key.loc, fmt::format("KeyError: '{}' (a key of '{}')", *k, attr));
    *name = attr + "['" + *k + "']";
  } else {
    std::optional<int64_t> i = const_int(Arg{&key, nullptr, key.loc});
    if (!i) fail(key.loc, fmt::format("'{}' is a {} of functions: its index must be an int known when lowering", attr,
                                      seq->kind == Kind::List ? "list" : "tuple"));
    int64_t n = int64_t(seq->elems.size()), k = *i < 0 ? *i + n : *i;
    if (k < 0 || k >= n) fail(key.loc, fmt::format("IndexError: index {} is out of range for '{}' of {} elements", *i, attr, n));
    picked = &seq->elems[size_t(k)];
    *name = fmt::format("{}[{}]", attr, k);
  }
  return picked;
}

bool Lowerer::function_for(const Stmt& s) {
  const Expr& target = *s.targets[0];
  const Object* owner = nullptr;
  const Static* seq = kept_sequence(*this, *s.value, &owner);
  if (!seq || seq->kind == Kind::Dict) return false;
  if (target.kind != ExprKind::Name) fail(target.loc, "a for over functions kept on self needs one name as its target");
  for (const Static& f : seq->elems)
    if (!is_function(f))
      fail(s.value->loc, fmt::format("'{}' mixes functions with a {}: a for over it needs functions only in kiln script",
                                     s.value->name, f.type_name()));
  unrolled_for(s, seq->elems.size(), [&, seq](size_t k) {
    frame().functions[target.name] = {&seq->elems[k], owner};
    frame().env.erase(target.name);
    frame().modules.erase(target.name);
  });
  return true;
}

}  // namespace kiln::script
