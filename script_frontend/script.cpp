#include "script_frontend/script.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/ir/verifier.h"
#include "eager/autocast/autocast.h"
#include "script_frontend/lower.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/objects.h"
#include "script_frontend/parser.h"

namespace kiln {

struct ScriptFile::Compiled {
  std::mutex mu;
  std::map<std::string, Function> functions;
};

ScriptFile::ScriptFile(std::shared_ptr<const script::File> file)
    : compiled_(std::make_shared<Compiled>()), file_(std::move(file)) {}

namespace {
const script::FunctionDef* find_def(const std::shared_ptr<const script::File>& file, const std::string& name) {
  if (file)
    for (const auto& f : file->ast.functions)
      if (f->name == name) return f.get();
  return nullptr;
}

bool compilable(const script::FunctionDef& f) {
  script::JitMark mark = script::jit_mark(f);
  return !script::dict_param(f) && mark != script::JitMark::Ignore && mark != script::JitMark::Unused;
}

void verify_graph(const std::string& fn, const ir::Graph& g) {
  // Lowering builds well-formed graphs; the verifier holds it to that.
  std::vector<std::string> errs = ir::verify_errors(g);
  if (!errs.empty()) fail("script: internal error: the graph of {} does not verify: {}\n{}", fn, errs[0], g.str());
}
}  // namespace

const Function& ScriptFile::function(const std::string& name) const {
  const script::FunctionDef* f = find_def(file_, name);
  if (f && compilable(*f)) {
    // Inside an AutocastGuard the graph records the scope's casts (as a trace would): one graph per dtype.
    std::string key = name;
    if (autocast_enabled()) key += ":autocast " + std::string(dtype_name(autocast_dtype()));
    std::lock_guard<std::mutex> lock(compiled_->mu);
    auto it = compiled_->functions.find(key);
    if (it != compiled_->functions.end()) return it->second;
    std::vector<std::string> errors;
    std::shared_ptr<ir::Graph> g = script::lower_one(file_->src, file_->ast, *f, errors, file_);
    script::raise_all(errors);
    verify_graph(name, *g);
    return compiled_->functions.emplace(key, Function(g, name)).first->second;
  }
  if (f && script::dict_param(*f))
    fail("script: function '{}' takes the dict parameter '{}', so it can only be called by the file's functions "
         "(calls are inlined, where the dict's keys are known); kiln script functions called from outside take "
         "tensors, numbers, tuples and lists",
         name, script::dict_param(*f)->name);
  if (f)
    fail("script: function '{}' is marked @torch.jit.{}, so it is not compiled (kiln runs no Python)", name,
         script::jit_mark_name(script::jit_mark(*f)));
  std::vector<std::string> names = function_names();
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  fail("script: no function '{}' in the module (it has: {}){}", name, all.empty() ? "none" : all,
       script::did_you_mean(name, names));
}

bool ScriptFile::has_function(const std::string& name) const {
  const script::FunctionDef* f = find_def(file_, name);
  return f && compilable(*f);
}

std::vector<std::string> ScriptFile::function_names() const {
  std::vector<std::string> out;
  if (file_)
    for (const auto& f : file_->ast.functions)
      if (compilable(*f)) out.push_back(f->name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> ScriptFile::class_names() const {
  std::vector<std::string> out;
  if (file_)
    for (const auto& c : file_->ast.classes) out.push_back(c->name);
  return out;
}

bool ScriptFile::binds(const std::string& name) const {
  if (!file_) return false;
  const script::FileAst& m = file_->ast;
  auto named = [&](const auto& defs) {
    return std::any_of(defs.begin(), defs.end(), [&](const auto& d) { return d->name == name; });
  };
  // collect() files every name a top-level statement binds under one of these
  return named(m.functions) || named(m.classes) || m.imported.count(name) || m.nn_names.count(name) ||
         m.functional_names.count(name) || m.rnn_utils_names.count(name) || m.unavailable.count(name) ||
         m.no_op_calls.count(name) || m.constants.count(name) || m.aliases.count(name) || m.namedtuples.count(name) ||
         m.namedtuple_makers.count(name);
}

std::shared_ptr<ScriptedModule> ScriptFile::module(const std::string& name, const std::vector<IValue>& args,
                                                     const std::map<std::string, IValue>& kwargs) const {
  std::vector<ScriptValue> a(args.begin(), args.end());
  std::map<std::string, ScriptValue> kw(kwargs.begin(), kwargs.end());
  return build(name, a, kw);
}

ScriptValue ScriptFile::value(const std::string& expr) const {
  auto f = std::make_shared<script::File>();
  f->src = script::Source{fmt::format("<value {}>", expr), "(" + expr + ")\n"};
  f->ast = script::parse_syntax(f->src);
  if (f->ast.body.size() != 1 || f->ast.body[0]->kind != script::StmtKind::Expr)
    fail("script: value() takes one expression, got '{}'", expr);
  ScriptValue v = IValue();
  v.expr_ = std::move(f);
  return v;
}

std::shared_ptr<ScriptedModule> ScriptFile::build(const std::string& name, const std::vector<ScriptValue>& args,
                                                    const std::map<std::string, ScriptValue>& kwargs) const {
  const script::ClassDef* cls = nullptr;
  if (file_)
    for (const auto& c : file_->ast.classes)
      if (c->name == name) cls = c.get();
  // a class kept only as a base to derive from (no forward of its own): building it is what fails
  if (cls && file_)
    if (auto it = file_->ast.unbuilt.find(name); it != file_->ast.unbuilt.end()) file_->src.fail(it->second.first, it->second.second);
  // A builder function (torchvision's `resnet18(weights=None)`): evaluated, its forward compiled as a class's.
  if (!cls && file_)
    for (const auto& f : file_->ast.functions)
      if (f->name == name) {
        auto arg = [](const ScriptValue& v) { return script::CtorArg{v.expr_ ? script::Static() : script::static_of(v.value_), v.expr_}; };
        std::vector<script::CtorArg> sargs;
        for (const ScriptValue& a : args) sargs.push_back(arg(a));
        std::map<std::string, script::CtorArg> skw;
        for (const auto& [k, v] : kwargs) skw[k] = arg(v);
        std::shared_ptr<ScriptedModule> m = script::construct_by(file_, *f, sargs, skw);
        m->method("forward");
        return m;
      }
  if (!cls && file_) {
    auto it = file_->ast.unbuilt.find(name);
    if (it != file_->ast.unbuilt.end()) file_->src.fail(it->second.first, it->second.second);
    if (const std::string* why = file_->ast.why_unavailable(name)) fail("{}: {}", file_->src.name, *why);
  }
  if (!cls) {
    std::vector<std::string> names = class_names();
    std::string all;
    for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
    fail("script: no class '{}' in the module (it has: {}){}", name, all.empty() ? "none" : all,
         script::did_you_mean(name, names));
  }
  if (cls->root()->torch_base.empty() || cls->root()->torch_base == "dataclass") {
    // a config object is an argument of a module, not one itself
    const script::Expr* base = cls->bases.empty() ? nullptr : cls->bases[0].get();
    if (base && base->kind == script::ExprKind::Name)
      file_->src.fail(base->loc, fmt::format("class '{}' must derive from nn.Module (imported as torch.nn) in kiln script, not '{}'",
                                             name, base->name));
    file_->src.fail(cls->loc, fmt::format("class '{}' is a {}, not an nn.Module: a config object that a module's "
                                          "constructor takes (value(\"{}(...)\"))",
                                          name, cls->root()->torch_base.empty() ? "plain class" : "@dataclass", name));
  }
  auto arg = [](const ScriptValue& v) { return script::CtorArg{v.expr_ ? script::Static() : script::static_of(v.value_), v.expr_}; };
  std::vector<script::CtorArg> sargs;
  for (const ScriptValue& a : args) sargs.push_back(arg(a));
  std::map<std::string, script::CtorArg> skw;
  for (const auto& [k, v] : kwargs) skw[k] = arg(v);
  std::shared_ptr<ScriptedModule> m = script::construct(file_, *cls, sargs, skw);
  // TorchScript's rule: forward (with what it calls) and the @torch.jit.export methods are compiled now; a
  // forward that needs a tuple in an unannotated parameter (an LSTM's state) is typed by its first call
  try {
    if (cls->method("forward")) m->method("forward");
  } catch (const script::Lowerer::UntypedParameter&) {
  }
  for (const auto& f : cls->methods)
    if (script::jit_mark(*f) == script::JitMark::Export) m->method(f->name);
  return m;
}

ScriptFile script_source(const std::string& text, const std::string& name) {
  auto file = std::make_shared<script::File>();
  file->src = script::Source{name, text};
  file->ast = script::parse(file->src);
  return ScriptFile(std::move(file));
}

ScriptFile script_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("script: cannot open {}", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return script_source(ss.str(), path);
}

void script::check_source(const std::string& text, const std::string& name) {
  auto file = std::make_shared<script::File>();  // a File, so lowered code reads module-level constants and imports
  file->src = script::Source{name, text};
  file->ast = script::parse(file->src);
  std::vector<std::string> errors;
  auto graphs = script::lower(file->src, file->ast, errors, script::looks_scripted, file);
  script::raise_all(errors);
  for (auto& [fn, g] : graphs)
    if (g) verify_graph(fn, *g);
}

}  // namespace kiln
