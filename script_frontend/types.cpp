// Script types: annotations to IR types, the equality lowering checks merges with, and the
// did-you-mean suggestion every "unknown name" error ends with.
#include <fmt/format.h>

#include <algorithm>

#include "script_frontend/lowerer.h"

namespace kiln::script {

Type type_from_annotation(const Source& src, const TypeExpr& t, const FileAst& m) {
  const std::set<std::string>& imported = m.imported;
  // Python evaluates annotations: each name must have been imported, as the file must run under it.
  auto need = [&](const char* name, const char* how) {
    if (!imported.count(name)) src.fail(t.loc, fmt::format("name '{}' is not defined (add `{}`)", name, how));
  };
  if (t.name == "Tensor") need("Tensor", "from torch import Tensor");
  if (t.name.rfind("torch.", 0) == 0) need("torch", "import torch");
  if (t.name == "List" || t.name == "Tuple" || t.name == "Optional")
    need(t.name.c_str(), t.name == "List" ? "from typing import List" : t.name == "Tuple" ? "from typing import Tuple"
                                                                                          : "from typing import Optional");
  auto args = [&](size_t n) {
    if (n != size_t(-1) && t.args.size() != n)
      src.fail(t.loc, fmt::format("{}[...] takes {} type argument{}, got {}", t.name, n, n == 1 ? "" : "s", t.args.size()));
  };
  const std::string& n = t.name;
  if (n == "Tensor" || n == "torch.Tensor") {
    args(0);
    return Type::tensor();
  }
  if (n == "int" || n == "float" || n == "bool" || n == "str" || n == "None") {
    args(0);
    return Type::scalar(n == "int" ? TypeKind::Int : n == "float" ? TypeKind::Float : n == "bool" ? TypeKind::Bool
                        : n == "str" ? TypeKind::Str : TypeKind::None);
  }
  if (n == "Tuple" || n == "tuple" || n == "typing.Tuple") {
    if (t.args.empty()) src.fail(t.loc, "Tuple needs its element types, e.g. Tuple[Tensor, int]");
    std::vector<Type> es;
    for (const TypeExpr& a : t.args) es.push_back(type_from_annotation(src, a, m));
    return Type::tuple(std::move(es));
  }
  if (n == "List" || n == "list" || n == "typing.List") {
    args(1);
    Type e = type_from_annotation(src, t.args[0], m);
    if (!e.is_tensor() && !is_number(e))
      src.fail(t.args[0].loc, fmt::format("List[{}] is not supported; lists hold Tensor, int, float or bool", e.str()));
    return Type::list(e);
  }
  if (n == "Optional" || n == "typing.Optional") {
    args(1);
    Type e = type_from_annotation(src, t.args[0], m);
    if (e.kind == TypeKind::Optional || e.kind == TypeKind::None)
      src.fail(t.args[0].loc, fmt::format("Optional[{}] is not supported", e.str()));
    return Type::optional(e);
  }
  if (const NamedTupleDef* def = m.namedtuple(n)) {
    args(0);
    std::vector<Type> es;
    for (const TypeExpr& f : def->types) es.push_back(type_from_annotation(src, f, m));
    return Type::tuple(std::move(es));
  }
  if (n == "Dict" || n == "dict" || n == "Any" || n == "Union")
    src.fail(t.loc, fmt::format("type {} is not supported in kiln script", n));
  src.fail(t.loc, fmt::format("unknown type '{}'; kiln script types are Tensor, int, float, bool, str, Tuple[...], "
                              "List[...] and Optional[...]{}",
                              n, did_you_mean(n, {"Tensor", "int", "float", "bool", "str", "Tuple", "List", "Optional"})));
}

bool is_number(const Type& t) { return t.kind == TypeKind::Int || t.kind == TypeKind::Float || t.kind == TypeKind::Bool; }

bool same_type(const Type& a, const Type& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == TypeKind::Tensor) return true;
  if (a.elems.size() != b.elems.size()) return false;
  for (size_t i = 0; i < a.elems.size(); ++i)
    if (!same_type(a.elems[i], b.elems[i])) return false;
  return true;
}

namespace {
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_d = 0;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(name, c);
    if (!best || d < best_d) {
      best = &c;
      best_d = d;
    }
  }
  // Close enough to be a typo: at most a third of the name (and at least one edit) away.
  if (!best || best_d == 0 || best_d > std::max<size_t>(1, name.size() / 3)) return "";
  return fmt::format("; did you mean {}?", *best);
}

}  // namespace kiln::script
