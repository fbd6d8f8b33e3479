#include "script_frontend/module.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/ir/verifier.h"
#include "eager/autocast/autocast.h"
#include "eager/autograd/graph.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/objects.h"
#include "script_frontend/parser.h"

namespace kiln {

ScriptedModule::ScriptedModule(std::shared_ptr<const script::File> file, std::shared_ptr<script::Object> object)
    : file_(std::move(file)), object_(std::move(object)) {}

std::string ScriptedModule::name() const { return object_->cls; }

Function ScriptedModule::method(const std::string& name) { return method_for(method_def(name), nullptr); }

namespace {
// The type a call's argument gives an unannotated parameter: a number, None or a tuple is itself (word_lm's
// LSTM state `hidden` is an (h, c) tuple), anything else keeps TorchScript's Tensor.
ir::Type argument_type(const IValue& v) {
  using ir::Type;
  using ir::TypeKind;
  if (v.is_int()) return Type::scalar(TypeKind::Int);
  if (v.is_double()) return Type::scalar(TypeKind::Float);
  if (v.is_bool()) return Type::scalar(TypeKind::Bool);
  if (v.is_none()) return Type::scalar(TypeKind::None);
  if (v.is_tuple()) {
    std::vector<Type> elems;
    for (const IValue& e : v.elements()) elems.push_back(argument_type(e));
    return Type::tuple(std::move(elems));
  }
  return Type::tensor();
}
}  // namespace

const script::FunctionDef& ScriptedModule::method_def(const std::string& name) const {
  const script::ClassDef& c = *object_->def;
  const script::FunctionDef* f = c.method(name);
  if (!f && name == "forward")  // a base class without forward builds, as in torch, and raises when called
    file_->src.fail(c.loc, fmt::format("class '{}' has no forward method (torch raises NotImplementedError: module [{}] "
                                       "is missing the required \"forward\" function)", c.name, c.name));
  if (!f || name == "__init__") {
    std::vector<std::string> names;
    std::string all;
    for (const auto& m : c.methods)
      if (m->name != "__init__") {
        names.push_back(m->name);
        all += (all.empty() ? "" : ", ") + m->name;
      }
    fail("script: class {} has no method '{}' (it has: {}){}", c.name, name, all, script::did_you_mean(name, names));
  }
  if (script::JitMark mark = script::jit_mark(*f); mark == script::JitMark::Ignore || mark == script::JitMark::Unused)
    fail("script: {}.{} is marked @torch.jit.{}, so it is not compiled (kiln runs no Python)", c.name, name, script::jit_mark_name(mark));
  return *f;
}

Function ScriptedModule::method_for(const script::FunctionDef& f, const std::vector<IValue>* args) {
  const script::ClassDef& c = *object_->def;
  const std::string& name = f.name;
  // Dropout and batch norm lower differently in training and evaluation: one graph per combination
  // of the tree's flags (in practice two: all training, all evaluating).
  std::string key = name + ":";
  object_->walk([&](const script::Object& o) { key += o.module->is_training() ? '1' : '0'; });
  // Inside an AutocastGuard the graph records the scope's casts (as a trace would): one graph per dtype.
  if (autocast_enabled()) key += ":autocast " + std::string(dtype_name(autocast_dtype()));
  std::vector<ir::Type> arg_types;
  // forward keeps one graph for every call, as the JIT's callers expect, unless a tuple comes where an
  // unannotated parameter would be a Tensor (a recurrent state): then it is typed by this call's arguments
  bool typed = args && (name != "forward" || std::any_of(args->begin(), args->end(), [](const IValue& a) { return a.is_tuple(); }));
  if (typed) {
    for (const IValue& a : *args) arg_types.push_back(argument_type(a));
    for (const ir::Type& t : arg_types) key += ":" + t.str();
  }
  auto it = methods_.find(key);
  if (it != methods_.end()) return it->second;
  // method() of a forward that its calls typed by their arguments (a tuple state): the graph those calls run,
  // so compile(net->method()) compiles what call() runs
  if (!args)
    for (const auto& [k, fn] : methods_)
      if (k.size() > key.size() + 1 && k.compare(0, key.size() + 1, key + ":") == 0 && k.compare(key.size() + 1, 8, "autocast") != 0)
        return fn;
  script::Lowerer lowerer(file_->src, file_->ast);
  lowerer.set_file(file_);
  script::MethodGraph mg;
  try {
    mg = lowerer.lower_method(f, *object_, arg_types);
  } catch (const script::Lowerer::UntypedParameter& e) {
    // still an UntypedParameter: module() leaves such a forward to its first call
    if (args) throw;
    throw script::Lowerer::UntypedParameter(
        fmt::format("{}\n(script: {}.{} has unannotated parameters, typed as Tensor here; call it once with its "
                    "arguments, and method() then gives the graph typed by them)",
                    e.what(), c.name, name));
  } catch (const Error& e) {
    // The first error raises; checking went on past it, and the method's later independent errors follow it.
    if (lowerer.later_errors().empty()) throw;
    std::vector<std::string> all{e.what()};
    all.insert(all.end(), lowerer.later_errors().begin(), lowerer.later_errors().end());
    script::raise_all(all);
  }
  std::vector<std::string> errs = ir::verify_errors(*mg.graph);
  if (!errs.empty())
    fail("script: internal error: the graph of {}.{} does not verify: {}\n{}", c.name, name, errs[0], mg.graph->str());
  Function::Binding binding;
  binding.bound = std::move(mg.bound);
  binding.writebacks = std::move(mg.writebacks);
  Function fn(mg.graph, c.name + "." + name, std::move(binding));
  methods_.emplace(key, fn);
  return fn;
}

std::vector<IValue> ScriptedModule::call(const std::vector<IValue>& args, const std::string& method_name) {
  const script::FunctionDef& def = method_def(method_name);
  Function f = method_for(def, &args);
  std::optional<NoGradGuard> no_grad;
  if (script::runs_without_grad(def)) no_grad.emplace();
  return f.call(args);
}

Tensor ScriptedModule::forward(const Tensor& x) {
  std::vector<IValue> out = call({x});
  if (out.size() != 1 || !out[0].is_tensor())
    fail("{}.forward returns {}, not one Tensor; use call()", name(), out.empty() ? std::string("nothing") : out[0].type_name());
  return out[0].to_tensor();
}

}  // namespace kiln
