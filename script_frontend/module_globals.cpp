// Module-level names in lowered code: `EPS = 1e-5`, `NEG_INF = float('-inf')`, a tuple, a name a relative
// import binds (`from ._utils import _make_divisible`, `from ..ops import f`, a sibling file's constant), the names
// of a module of the package bound as a value (`from . import helpers`, then `helpers.f(x)`, `helpers.CONST`). As
// TorchScript, a module-level value is a constant of the graph: __init__'s evaluator computes it (so lowered code
// and __init__ read the same value, the imported file read lazily, only the name used evaluated), and a
// function value is inlined where it is called, its names read in its own file. A lambda kept on self or bound
// at module level is inlined the same way, with the locals it captured when it was made.
#include <fmt/format.h>

#include <algorithm>

#include "script_frontend/lowerer.h"

namespace kiln::script {

std::shared_ptr<const File> Lowerer::current_file() const {
  if (file_ && &file_->ast == m_) return file_;
  for (auto fr = frames_.rbegin(); fr != frames_.rend(); ++fr)
    if (fr->self && fr->self->file && &fr->self->file->ast == m_) return fr->self->file;
  for (const auto& f : files_)
    if (&f->ast == m_) return f;
  if (!frames_.empty() && frames_.front().self)
    for (const auto& f : frames_.front().self->imports)
      if (&f->ast == m_) return f;
  return nullptr;
}

const ModuleGlobal* Lowerer::module_global(const std::string& name, SourceLoc loc) {
  auto a = m_->aliases.find(name);
  bool imported = a != m_->aliases.end() && a->second.rfind("import:", 0) == 0;
  if ((!m_->constants.count(name) && !imported) || m_->namedtuple(name)) return nullptr;  // a namedtuple type is lowered as one
  if (auto c = m_->constants.find(name); c != m_->constants.end() && c->second->kind == ExprKind::Call) {
    const Expr& maker = *c->second->args[0];  // a malformed namedtuple keeps the error collect() gave it
    if (maker.kind == ExprKind::Name && m_->namedtuple_makers.count(maker.name)) return nullptr;
  }
  std::shared_ptr<const File> file = current_file();
  if (!file) return nullptr;  // a source with no File (kiln check of a bare function): the name stays unavailable
  return global_of(file, name, loc, false);
}

const ModuleGlobal* Lowerer::global_of(const std::shared_ptr<const File>& file, const std::string& name, SourceLoc loc, bool attribute) {
  auto key = std::make_pair(&file->ast, name);
  if (auto it = globals_.find(key); it != globals_.end()) return &it->second;
  std::vector<std::shared_ptr<const File>> known = files_;
  if (!frames_.empty() && frames_.front().self)
    known.insert(known.end(), frames_.front().self->imports.begin(), frames_.front().self->imports.end());
  std::optional<ModuleGlobal> g = script::module_global(file, name, loc, known, attribute);
  if (!g) return nullptr;
  for (const auto& f : g->files)
    if (std::find(files_.begin(), files_.end(), f) == files_.end()) files_.push_back(f);
  return &globals_.emplace(key, std::move(*g)).first->second;
}

const ModuleGlobal* Lowerer::module_attribute(const Expr& e) {
  if (e.kind != ExprKind::Attribute) return nullptr;
  const Static* mod = global_static(*e.args[0]);
  if (!mod || !is_file_module(*mod)) return nullptr;
  for (const auto& f : files_)
    if (f->src.name == file_module_path(*mod)) {
      const ModuleGlobal* g = global_of(f, e.name, e.loc, true);
      if (!g) fail(e.loc, fmt::format("module '{}' has no attribute '{}'", module_dotted_name(f->src.name), e.name));
      return g;
    }
  return nullptr;
}

const Static* Lowerer::global_static(const Expr& e) {
  if (e.kind != ExprKind::Name || frames_.empty() || frame().env.count(e.name) || frame().modules.count(e.name)) return nullptr;
  const ModuleGlobal* g = module_global(e.name, e.loc);
  return g ? &g->value : nullptr;
}

Value* Lowerer::call_function_value(const Static& fn, const Expr& call, const File* home, const std::string& name) {
  if (fn.kind != Static::Kind::Function || !fn.fn)
    fail(call.args[0]->loc, fmt::format("'{}' is a {}, which lowered code cannot call in kiln script", name, fn.type_name()));
  // what a lambda captured: constants of __init__ by value, modules (self, a layer local) as module objects
  Closure closure;
  for (size_t i = 0; i < fn.keys.size(); ++i) {
    const Static& v = fn.elems[i];
    if (v.kind == Static::Kind::Module && v.obj && !v.obj->plain) {
      closure.modules.emplace(fn.keys[i], v.obj.get());
      continue;
    }
    bool constant = v.is_number() || v.kind == Static::Kind::Str || v.kind == Static::Kind::None || v.kind == Static::Kind::Tuple ||
                    (v.kind == Static::Kind::List && !v.elems.empty());
    if (!constant)
      fail(call.args[0]->loc, fmt::format("'{}' captures '{}', a {} of the code that made it, which lowered code cannot read in kiln "
                                          "script (a lambda may capture numbers, strings, tuples, lists and modules)",
                                          name, fn.keys[i], v.type_name()));
    closure.values.emplace_back(fn.keys[i], static_value(v, fn.keys[i], call.loc));
  }
  return inline_call(*fn.fn, call, nullptr, home, &closure);
}

}  // namespace kiln::script
