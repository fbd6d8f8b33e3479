// Named tuples: torchvision returns `GoogLeNetOutputs(x, aux2, aux1)` from forward. The collector
// records `X = namedtuple("X", [...])` (with `X.__annotations__ = {...}` for the field types, which is
// how TorchScript learns them) and `class X(NamedTuple):`; lowering builds one as a tuple of the
// declared field types and reads its fields by name as well as by index.
#include <fmt/format.h>

#include <cctype>

#include "script_frontend/lowerer.h"
#include "script_frontend/parser.h"

namespace kiln::script {

using ir::Node;
using ir::Prim;

namespace {

// An annotation written as a dict value (`Optional[Tensor]`): read as the parser reads annotations.
TypeExpr type_of_value(const Expr& e) {
  TypeExpr t;
  t.loc = e.loc;
  if (e.kind == ExprKind::None) {
    t.name = "None";
  } else if (e.kind == ExprKind::Name || e.kind == ExprKind::Attribute) {
    t.name = dotted(e);
  } else if (e.kind == ExprKind::Subscript) {
    t = type_of_value(*e.args[0]);
    t.loc = e.loc;
    for (size_t i = 1; i < e.args.size(); ++i) {
      if (e.args[i]->kind == ExprKind::Tuple)
        for (const auto& a : e.args[i]->args) t.args.push_back(type_of_value(*a));
      else
        t.args.push_back(type_of_value(*e.args[i]));
    }
  }
  if (t.name.empty()) t.name = "<expression>";  // an unknown type where it is used
  return t;
}

TypeExpr tensor_type(SourceLoc loc) {
  TypeExpr t;
  t.name = "Tensor";
  t.loc = loc;
  return t;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// namedtuple("X", ["a", "b"]), ("a", "b") or "a b" / "a, b" as Python splits it. Null with the reason for
// a call Python accepts but kiln script does not read (the name stays unavailable with it); raises where
// Python itself would.
std::shared_ptr<NamedTupleDef> from_call(const Source& src, const Expr& call, const std::string& bound, std::string& why) {
  if (call.args.size() != 3 || !call.keywords.empty()) {
    why = fmt::format("'{}' is a namedtuple (line {}) made with arguments other than a name and field names, which kiln script "
                      "does not support",
                      bound, call.loc.line);
    return nullptr;
  }
  const Expr& name = *call.args[1];
  const Expr& fields = *call.args[2];
  if (name.kind != ExprKind::String || name.name != bound) {
    why = fmt::format("'{}' is a namedtuple (line {}) whose type name is not the string '{}', which kiln script needs", bound,
                      call.loc.line, bound);
    return nullptr;
  }
  auto def = std::make_shared<NamedTupleDef>();
  def->name = name.name;
  def->loc = call.loc;
  auto add = [&](const std::string& f, SourceLoc loc) {
    if (!is_identifier(f) || f[0] == '_') src.fail(loc, fmt::format("namedtuple field name '{}' is not a valid identifier", f));
    for (const std::string& g : def->fields)
      if (g == f) src.fail(loc, fmt::format("namedtuple field '{}' is given twice", f));
    def->fields.push_back(f);
    def->types.push_back(tensor_type(loc));
  };
  if (fields.kind == ExprKind::String) {
    std::string f;
    for (char c : fields.name + " ") {
      if (c == ' ' || c == ',') {
        if (!f.empty()) add(f, fields.loc);
        f.clear();
      } else {
        f += c;
      }
    }
  } else if (fields.kind == ExprKind::List || fields.kind == ExprKind::Tuple) {
    for (const auto& a : fields.args) {
      if (a->kind != ExprKind::String) src.fail(a->loc, "namedtuple() field names must be string constants");
      add(a->name, a->loc);
    }
  } else {
    src.fail(fields.loc, "namedtuple() field names must be a list of string constants");
  }
  return def;
}

std::string maker(const FileAst& m, const Expr& e) {
  auto it = m.namedtuple_makers.find(dotted(e));
  return it == m.namedtuple_makers.end() ? "" : it->second;
}

}  // namespace

bool collect_namedtuple(const Source& src, FileAst& m, const Stmt& s) {
  if (s.kind == StmtKind::ClassDef) {
    const ClassDef& c = *s.cls;
    if (c.bases.size() != 1 || maker(m, *c.bases[0]) != "typing.NamedTuple") return false;
    // What Python accepts but kiln script does not read leaves the class unavailable with the reason.
    auto unsupported = [&](SourceLoc loc, const std::string& what) {
      m.unavailable.emplace(c.name, fmt::format("NamedTuple class '{}' (line {}) has {} (line {}), which kiln script does not support",
                                                c.name, c.loc.line, what, loc.line));
      return true;
    };
    if (!c.decorators.empty()) return unsupported(c.decorators[0]->loc, "a decorator");
    auto def = std::make_shared<NamedTupleDef>();
    def->name = c.name;
    def->loc = c.loc;
    for (const StmtPtr& st : c.body) {
      if (st->kind == StmtKind::Pass || (st->kind == StmtKind::Expr && st->value->kind == ExprKind::String)) continue;
      if (st->kind != StmtKind::AnnAssign || st->targets.size() != 1 || st->targets[0]->kind != ExprKind::Name)
        return unsupported(st->loc, "a statement other than an annotated field");
      if (st->value) return unsupported(st->value->loc, fmt::format("a default for field '{}'", st->targets[0]->name));
      def->fields.push_back(st->targets[0]->name);
      def->types.push_back(st->annotation);
    }
    m.namedtuples[c.name] = def;
    return true;
  }
  if (s.kind != StmtKind::Assign || s.targets.size() != 1 || !s.value) return false;
  const Expr& t = *s.targets[0];
  const Expr& v = *s.value;
  if (t.kind == ExprKind::Name && v.kind == ExprKind::Call && maker(m, *v.args[0]) == "collections.namedtuple") {
    std::string why;
    if (auto def = from_call(src, v, t.name, why)) m.namedtuples[t.name] = def;
    else m.unavailable.emplace(t.name, why);
    return true;
  }
  if (t.kind == ExprKind::Name && v.kind == ExprKind::Name && m.namedtuples.count(v.name)) {
    m.namedtuples[t.name] = m.namedtuples.at(v.name);  // `_Outputs = Outputs`: the same type
    return true;
  }
  if (t.kind == ExprKind::Attribute && t.name == "__annotations__" && t.args[0]->kind == ExprKind::Name &&
      m.namedtuples.count(t.args[0]->name)) {
    NamedTupleDef& def = *m.namedtuples.at(t.args[0]->name);
    if (v.kind != ExprKind::Dict) src.fail(v.loc, fmt::format("{}.__annotations__ must be a dict literal in kiln script", def.name));
    for (size_t i = 0; i + 1 < v.args.size(); i += 2) {
      const Expr* key = v.args[i].get();
      if (!key || key->kind != ExprKind::String)
        src.fail(key ? key->loc : v.loc, fmt::format("{}.__annotations__ keys must be field names", def.name));
      bool found = false;
      for (size_t f = 0; f < def.fields.size(); ++f)
        if (def.fields[f] == key->name) {
          def.types[f] = type_of_value(*v.args[i + 1]);
          found = true;
        }
      if (!found) src.fail(key->loc, fmt::format("namedtuple '{}' has no field '{}'", def.name, key->name));
    }
    return true;
  }
  return false;
}

Type Lowerer::namedtuple_type(const NamedTupleDef& def) {
  TypeExpr t;
  t.name = def.name;
  t.loc = def.loc;
  return type_from_annotation(*src_, t, *m_);
}

Value* Lowerer::construct_namedtuple(const NamedTupleDef& def, const Expr& call) {
  Type t = namedtuple_type(def);
  std::vector<Value*> vals(def.fields.size(), nullptr);
  std::vector<SourceLoc> locs(def.fields.size(), call.loc);
  if (call.args.size() - 1 > def.fields.size())
    fail(call.loc, fmt::format("{}() takes {} arguments, got {}", def.name, def.fields.size(), call.args.size() - 1));
  for (size_t i = 1; i < call.args.size(); ++i) {
    if (call.args[i]->kind == ExprKind::Starred) fail(call.args[i]->loc, "starred arguments are only supported in __init__");
    vals[i - 1] = expr(*call.args[i]);
    locs[i - 1] = call.args[i]->loc;
  }
  for (const Keyword& k : call.keywords) {
    size_t f = 0;
    while (f < def.fields.size() && def.fields[f] != k.name) ++f;
    if (f == def.fields.size())
      fail(k.loc, fmt::format("{}() got an unexpected keyword argument '{}'{}", def.name, k.name, did_you_mean(k.name, def.fields)));
    if (vals[f]) fail(k.loc, fmt::format("{}() got multiple values for argument '{}'", def.name, k.name));
    vals[f] = expr(*k.value);
    locs[f] = k.loc;
  }
  for (size_t f = 0; f < vals.size(); ++f) {
    if (!vals[f]) fail(call.loc, fmt::format("{}() is missing the argument '{}'", def.name, def.fields[f]));
    vals[f] = coerce(vals[f], t.elems[f], locs[f], fmt::format("{}.{}", def.name, def.fields[f]));
  }
  loc_ = call.loc;
  Value* v = prim(Prim::TupleConstruct, vals, t);
  named_tuples_[v] = &def;
  return v;
}

std::optional<Value*> Lowerer::namedtuple_field(Value* x, const std::string& field, SourceLoc loc) {
  auto it = named_tuples_.find(x);
  if (it == named_tuples_.end()) return std::nullopt;
  const NamedTupleDef& def = *it->second;
  for (size_t f = 0; f < def.fields.size(); ++f)
    if (def.fields[f] == field) {
      if (x->node()->prim() == Prim::TupleConstruct) return x->node()->input(f);
      loc_ = loc;
      Node* n = g_->create(Prim::TupleIndex, 1);
      n->add_input(x);
      n->attrs().set("index", int64_t(f));
      n->output()->set_type(x->type().elems[f]);
      return emit(n)->output();
    }
  fail(loc, fmt::format("'{}' object has no attribute '{}'{}", def.name, field, did_you_mean(field, def.fields)));
}

Value* Lowerer::values_indices(const std::string& fn, Value* values, Value* indices) {
  static const std::map<std::string, NamedTupleDef> kReturnTypes = [] {
    std::map<std::string, NamedTupleDef> m;
    for (const char* f : {"topk", "sort", "max", "min", "median", "kthvalue"}) {
      NamedTupleDef& d = m[f];
      d.name = std::string("torch.return_types.") + f;
      d.fields = {"values", "indices"};
      d.types = {tensor_type({}), tensor_type({})};
    }
    return m;
  }();
  Value* v = tuple({values, indices});
  named_tuples_[v] = &kReturnTypes.at(fn);
  return v;
}

void Lowerer::note_namedtuple(Value* v, const TypeExpr& annotation) {
  if (!annotation.args.empty()) return;
  if (const NamedTupleDef* def = m_->namedtuple(annotation.name)) named_tuples_[v] = def;
}

}  // namespace kiln::script
