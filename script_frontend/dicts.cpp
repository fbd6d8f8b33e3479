// Dicts with string keys known when lowering (`Dict[str, Tensor]` as model files use them for named
// outputs): a dict is a tuple of its values in the graph, in insertion order, and its keys live in the
// lowering (dict_keys_), so d["k"], `"k" in d`, len(d) and loops over keys()/values()/items() resolve
// now and cost nothing at run time. A dict returned by a function is that tuple.
#include <fmt/format.h>

#include <algorithm>

#include "script_frontend/lowerer.h"

namespace kiln::script {

using ir::Node;
using ir::Prim;

namespace {
std::string keys_str(const std::vector<std::string>& keys) {
  std::string s = "[";
  for (size_t i = 0; i < keys.size(); ++i) s += fmt::format("{}'{}'", i ? ", " : "", keys[i]);
  return s + "]";
}
}  // namespace

const std::vector<std::string>* Lowerer::dict_keys(Value* v) const {
  auto it = dict_keys_.find(v);
  return it == dict_keys_.end() ? nullptr : &it->second;
}

Value* Lowerer::make_dict(const std::vector<std::string>& keys, const std::vector<Value*>& values) {
  Value* d = tuple(values);
  dict_keys_[d] = keys;
  return d;
}

std::vector<Value*> Lowerer::dict_values(Value* d) {
  const Type& t = d->type();
  if (d->node()->prim() == Prim::TupleConstruct) return d->node()->inputs();
  std::vector<Value*> out;
  for (size_t i = 0; i < t.elems.size(); ++i) {
    Node* ix = g_->create(Prim::TupleIndex, 1);
    ix->add_input(d);
    ix->attrs().set("index", int64_t(i));
    ix->output()->set_type(t.elems[i]);
    out.push_back(emit(ix)->output());
  }
  return out;
}

std::string Lowerer::dict_key(const Expr& key) {
  auto k = const_str(Arg{&key, nullptr, key.loc});
  if (!k) fail(key.loc, "dict keys must be string constants in kiln script (d[\"name\"])");
  return *k;
}

Value* Lowerer::dict_literal(const Expr& e) {
  std::vector<std::string> keys;
  std::vector<Value*> values;
  for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
    if (!e.args[i]) fail(e.args[i + 1]->loc, "dict unpacking (**) is not supported in kiln script");
    std::string k = dict_key(*e.args[i]);
    Value* v = expr(*e.args[i + 1]);
    auto at = std::find(keys.begin(), keys.end(), k);
    if (at != keys.end()) {
      values[size_t(at - keys.begin())] = v;  // a repeated key keeps its first place, as Python
      continue;
    }
    keys.push_back(k);
    values.push_back(v);
  }
  loc_ = e.loc;
  return make_dict(keys, values);
}

Value* Lowerer::dict_get(Value* d, const Expr& key) {
  const auto& keys = *dict_keys(d);
  std::string k = dict_key(key);
  auto at = std::find(keys.begin(), keys.end(), k);
  if (at == keys.end()) fail(key.loc, fmt::format("KeyError: '{}' (the dict has keys {})", k, keys_str(keys)));
  return dict_values(d)[size_t(at - keys.begin())];
}

bool is_dict_annotation(const TypeExpr& t) { return t.name == "Dict" || t.name == "dict"; }

const Param* dict_param(const FunctionDef& f) {
  for (const Param& p : f.params)
    if (p.has_type && is_dict_annotation(p.type)) return &p;
  return nullptr;
}

// A Dict[str, T] parameter of a function the lowering inlines: the caller's dict, keys and all. Its
// values must be T (a Tensor, a number, ...), as TorchScript checks.
Value* Lowerer::dict_argument(const Param& p, const FunctionDef& f, Value* arg, SourceLoc loc) {
  const TypeExpr& t = p.type;
  if (t.args.size() != 2 || t.args[0].name != "str")
    fail(t.loc, fmt::format("parameter '{}': kiln script dicts are Dict[str, T] (string keys)", p.name));
  Type vt = type_from_annotation(*src_, t.args[1], *m_);
  if (!dict_keys(arg))
    fail(loc, fmt::format("argument '{}' of {}() expects Dict[str, {}], got {}", p.name, f.name, vt.str(), arg->type().str()));
  const std::vector<std::string>& keys = *dict_keys(arg);
  for (size_t i = 0; i < keys.size(); ++i)
    if (!same_type(arg->type().elems[i], vt))
      fail(loc, fmt::format("argument '{}' of {}() expects Dict[str, {}], but its entry '{}' is {}", p.name, f.name,
                            vt.str(), keys[i], arg->type().elems[i].str()));
  return arg;
}

void Lowerer::dict_store(const Expr& target, std::optional<PyOp> op, const Expr& rhs, SourceLoc loc) {
  const Expr& base = *target.args[0];
  if (base.kind != ExprKind::Name) fail(target.loc, "kiln script assigns to dict entries of a variable only (d[\"k\"] = v)");
  if (target.args.size() != 2) fail(target.loc, "a dict takes one key");
  Value* d = name(base);
  auto p = param_of_.find(d);
  if (p != param_of_.end())
    fail(loc, fmt::format("cannot assign to an entry of '{}': it is {}, and the caller would see the change, which "
                          "kiln script does not track; build a new dict instead",
                          base.name, p->second));
  std::vector<std::string> keys = *dict_keys(d);
  std::vector<Value*> values = dict_values(d);
  std::string k = dict_key(*target.args[1]);
  auto at = std::find(keys.begin(), keys.end(), k);
  Value* v = nullptr;
  if (!op) {
    v = expr(rhs);
  } else {
    if (at == keys.end()) fail(target.args[1]->loc, fmt::format("KeyError: '{}' (the dict has keys {})", k, keys_str(keys)));
    Value* cur = values[size_t(at - keys.begin())];
    Value* r = expr(rhs);
    loc_ = loc;
    if (cur->type().is_tensor()) {
      // torch updates the tensor in place: refused where another name could see it.
      for (auto& [m, x] : frame().env)
        if (m[0] != '$' && x->type().is_tensor() && alias_root(x) == alias_root(cur))
          fail(loc, fmt::format("cannot write in place to d['{}']: '{}' shares its memory, and kiln script does not "
                                "track tensors inside a dict; write d['{}'] = d['{}'] {} v",
                                k, m, k, k, spelling(*op)));
      v = prim(Prim::InplaceResult, {binary(*op, cur, r, loc), cur}, Type::tensor());
    } else {
      v = binary(*op, cur, r, loc);
    }
  }
  loc_ = loc;
  if (at == keys.end()) {
    keys.push_back(k);
    values.push_back(v);
  } else {
    values[size_t(at - keys.begin())] = v;
  }
  assign(base, make_dict(keys, values), loc);
}

bool Lowerer::dict_for(const Stmt& s) {
  const Expr& it = *s.value;
  const Expr* de = &it;
  std::string method;
  if (it.kind == ExprKind::Call && it.args[0]->kind == ExprKind::Attribute && it.args.size() == 1 &&
      (it.args[0]->name == "keys" || it.args[0]->name == "values" || it.args[0]->name == "items")) {
    de = it.args[0]->args[0].get();
    method = it.args[0]->name;
  }
  // a dict of __init__ (self.params, an nn.ParameterDict) or of module level: its keys are known too
  auto static_dict = [&](const Static* v) { return v && v->kind == Static::Kind::Dict; };
  const Object* owner = de->kind == ExprKind::Attribute ? static_object(*de->args[0]) : nullptr;
  bool attr_dict = owner && static_dict(owner->attr(de->name));
  if (de->kind != ExprKind::Name && de->kind != ExprKind::Dict && !attr_dict) return false;
  if (de->kind == ExprKind::Name && !frame().env.count(de->name) && !static_dict(global_static(*de))) return false;
  Value* d = expr(*de);
  if (!dict_keys(d)) return false;
  std::vector<std::string> keys = *dict_keys(d);
  std::vector<Value*> values = dict_values(d);
  const Expr& target = *s.targets[0];
  if (method == "items" && (target.kind != ExprKind::Tuple || target.args.size() != 2))
    fail(target.loc, "a for over dict.items() needs two names as its target: for k, v in d.items()");
  // Unrolled, as a tuple loop: the values may differ in type.
  unrolled_for(s, keys.size(), [&](size_t i) {
    loc_ = s.loc;
    Value* key = g_->insert_constant(keys[i]);
    key->set_type(Type::scalar(TypeKind::Str));
    if (method == "values") return assign(target, values[i], target.loc);
    if (method == "items") {
      assign(*target.args[0], key, target.loc);
      return assign(*target.args[1], values[i], target.loc);
    }
    assign(target, key, target.loc);
  });
  return true;
}

std::optional<bool> Lowerer::dict_condition(const Expr& test) {
  if (test.kind != ExprKind::Compare || test.ops.size() != 1 || (test.ops[0] != PyOp::In && test.ops[0] != PyOp::NotIn))
    return std::nullopt;
  const Expr& d = *test.args[1];
  if (d.kind != ExprKind::Name) return std::nullopt;
  auto it = frame().env.find(d.name);
  if (it == frame().env.end() || !dict_keys(it->second)) return std::nullopt;
  auto k = const_str(Arg{test.args[0].get(), nullptr, test.args[0]->loc});
  if (!k) return std::nullopt;
  const auto& keys = *dict_keys(it->second);
  bool found = std::find(keys.begin(), keys.end(), *k) != keys.end();
  return test.ops[0] == PyOp::In ? found : !found;
}

void Lowerer::merge_dict(Value* out, Value* a, Value* b, const std::string& var, SourceLoc loc, const char* where) {
  const auto* ka = dict_keys(a);
  const auto* kb = dict_keys(b);
  if (!ka && !kb) return;
  // A placeholder stands for a branch that exits: the other side's keys hold.
  if (ka && kb && *ka != *kb)
    fail(loc, fmt::format("dict '{}' has keys {} and {} on the two sides of this {}; kiln script needs the same keys "
                          "(in the same order) on every path",
                          var, keys_str(*ka), keys_str(*kb), where));
  dict_keys_[out] = ka ? *ka : *kb;
}

}  // namespace kiln::script
