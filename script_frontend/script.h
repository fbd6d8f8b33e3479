#pragma once
// script(): a kiln script file (a TorchScript-compatible subset of Python) compiled to one IR graph
// per function, each callable as a kiln::Function on the reference interpreter.
//
//   auto m = kiln::script_file("model.py");
//   kiln::Function f = m.function("forward");
//   std::vector<kiln::IValue> out = f.call({x, int64_t(3)});
//
//   auto net = m.module("Net", {int64_t(10)});   // a class Net(nn.Module): a kiln nn::Module
//
// Syntax errors, and top-level code kiln script does not accept, are reported when the file is read, as
// `file:line:col: error: message`, the source line and a caret. As in TorchScript, only what is asked for is
// compiled: a function when function() first asks for it (with the functions it calls), a class's forward,
// the methods it calls and its @torch.jit.export methods when module() builds it (its __init__ decides what
// they see). Every error of what is compiled is reported before anything runs; other defs may hold any Python.
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/interp/function.h"
#include "script_frontend/module.h"

namespace kiln {

// A constructor argument for ScriptFile::build(): any IValue, or an expression of the file that
// ScriptFile::value() names (a class, a function's result, a module-level constant).
class ScriptValue {
 public:
  ScriptValue(IValue v) : value_(std::move(v)) {}  // NOLINT: implicit, as IValue's own
  template <class T>
    requires(std::is_constructible_v<IValue, T &&> && !std::is_same_v<std::decay_t<T>, IValue> &&
             !std::is_same_v<std::decay_t<T>, ScriptValue>)
  ScriptValue(T&& v) : value_(IValue(std::forward<T>(v))) {}  // NOLINT

 private:
  friend class ScriptFile;
  IValue value_;
  std::shared_ptr<const script::File> expr_;  // the expression, parsed, when set
};

class ScriptFile {
 public:
  ScriptFile() = default;
  explicit ScriptFile(std::shared_ptr<const script::File> file);
  // The function lowered on first use (thread-safe; copies of this ScriptFile share the graphs). Raises
  // kiln::Error naming the functions the file has when there is no such function, and the function's errors.
  const Function& function(const std::string& name) const;
  bool has_function(const std::string& name) const;
  // The functions function() can compile: every top-level def but @torch.jit.ignore / unused ones and
  // those taking a dict parameter.
  std::vector<std::string> function_names() const;

  // Builds an instance of the file's class `name` (an nn.Module subclass): runs its __init__ with
  // these arguments (numbers, strings, tuples and lists of them, by position, then by keyword) and
  // lowers its forward for the module's training mode, so errors in either are raised here.
  std::shared_ptr<ScriptedModule> module(const std::string& name, const std::vector<IValue>& args = {},
                                         const std::map<std::string, IValue>& kwargs = {}) const;
  std::vector<std::string> class_names() const;
  // Whether a top-level statement of the file binds name (a class, a def, an import, an assignment, also one
  // kiln does not run): what `kiln check FILE CLASS ARG...` reads as Python, where another word is a string.
  bool binds(const std::string& name) const;
  // What `kiln check FILE` checks besides the script functions: each nn.Module class whose __init__ needs no
  // argument is built (its __init__ run; forward, what it calls and its exports lowered) and its errors
  // appended to errors, each once; a class that needs arguments is not built but named in `skipped`, one line each.
  void check_classes(std::vector<std::string>& errors, std::vector<std::string>& skipped) const;

  // An expression over the file's names, evaluated as __init__ evaluates (when build() runs): a class
  // (`value("BasicBlock")`), a torch.nn class, a partial, a call of a function of the file
  // (`value("make_layers(cfgs['A'])")`), a module-level constant. Raises kiln::Error for a syntax error.
  ScriptValue value(const std::string& expr) const;
  // module() for constructors that take classes, functions or config objects:
  //   file.build("ResNet", {file.value("BasicBlock"), IValue::list({2, 2, 2, 2})}, {{"num_classes", 10}})
  std::shared_ptr<ScriptedModule> build(const std::string& name, const std::vector<ScriptValue>& args = {},
                                        const std::map<std::string, ScriptValue>& kwargs = {}) const;

 private:
  struct Compiled;  // the functions lowered so far, under a mutex
  std::shared_ptr<Compiled> compiled_;
  std::shared_ptr<const script::File> file_;
};

ScriptFile script_source(const std::string& text, const std::string& name = "<script>");
ScriptFile script_file(const std::string& path);

// The name before: torch's ScriptModule is a module, this is a parsed file (the modules it builds are
// ScriptedModule), so code written against the old name still builds, with a warning.
using ScriptModule [[deprecated("renamed ScriptFile")]] = ScriptFile;

namespace script {
// Lexes, parses and lowers every function written as a script function (looks_scripted: a model file's
// builders and __init__ helpers are not), reporting every error: what `kiln check FILE` and the fuzzer run.
void check_source(const std::string& text, const std::string& name);
// What `kiln check FILE` reports: check_source's errors, then ScriptFile::check_classes's, each once
// (`file:line:col: error: ...`, its source line and a caret); the classes not built are named in skipped.
std::vector<std::string> check_all(const std::string& text, const std::string& name, std::vector<std::string>& skipped);
}  // namespace script

}  // namespace kiln
