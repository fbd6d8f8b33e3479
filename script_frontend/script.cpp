#include "script_frontend/script.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/ir/verifier.h"
#include "script_frontend/lower.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/objects.h"
#include "script_frontend/parser.h"

namespace kiln {

const Function& ScriptModule::function(const std::string& name) const {
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  if (file_)
    for (const auto& f : file_->ast.functions)
      if (const script::Param* p = f->name == name ? script::dict_param(*f) : nullptr)
        fail("script: function '{}' takes the dict parameter '{}', so it can only be called by the file's functions "
             "(calls are inlined, where the dict's keys are known); kiln script functions called from outside take "
             "tensors, numbers, tuples and lists",
             name, p->name);
  std::vector<std::string> names = function_names();
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  fail("script: no function '{}' in the module (it has: {}){}", name, all.empty() ? "none" : all,
       script::did_you_mean(name, names));
}

std::vector<std::string> ScriptModule::function_names() const {
  std::vector<std::string> out;
  for (const auto& [k, f] : functions_) out.push_back(k);
  return out;
}

std::vector<std::string> ScriptModule::class_names() const {
  std::vector<std::string> out;
  if (file_)
    for (const auto& c : file_->ast.classes) out.push_back(c->name);
  return out;
}

std::shared_ptr<ScriptedModule> ScriptModule::module(const std::string& name, const std::vector<IValue>& args,
                                                     const std::map<std::string, IValue>& kwargs) const {
  const script::ClassDef* cls = nullptr;
  if (file_)
    for (const auto& c : file_->ast.classes)
      if (c->name == name) cls = c.get();
  if (!cls) {
    std::vector<std::string> names = class_names();
    std::string all;
    for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
    fail("script: no class '{}' in the module (it has: {}){}", name, all.empty() ? "none" : all,
         script::did_you_mean(name, names));
  }
  std::vector<script::Static> sargs;
  for (const IValue& a : args) sargs.push_back(script::static_of(a));
  std::map<std::string, script::Static> skw;
  for (const auto& [k, v] : kwargs) skw[k] = script::static_of(v);
  std::shared_ptr<ScriptedModule> m = script::construct(file_, *cls, sargs, skw);
  m->method("forward");
  return m;
}

namespace {
std::map<std::string, std::shared_ptr<ir::Graph>> compile(const script::Source& src, const script::Module& m) {
  auto graphs = script::lower(src, m);
  // Lowering builds well-formed graphs; the verifier holds it to that.
  for (auto& [fn, g] : graphs) {
    std::vector<std::string> errs = ir::verify_errors(*g);
    if (!errs.empty()) fail("script: internal error: the graph of {} does not verify: {}\n{}", fn, errs[0], g->str());
  }
  return graphs;
}
}  // namespace

ScriptModule script_source(const std::string& text, const std::string& name) {
  auto file = std::make_shared<script::File>();
  file->src = script::Source{name, text};
  // Parse errors are reported alone: lowering a file with a broken definition would cascade.
  file->ast = script::parse(file->src);
  std::map<std::string, Function> fns;
  for (auto& [fn, g] : compile(file->src, file->ast)) fns.emplace(fn, Function(g, fn));
  return ScriptModule(std::move(fns), std::move(file));
}

ScriptModule script_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("script: cannot open {}", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return script_source(ss.str(), path);
}

void script::check_source(const std::string& text, const std::string& name) {
  script::Source src{name, text};
  script::Module m = script::parse(src);
  compile(src, m);
}

}  // namespace kiln
