#pragma once
// script(): a kiln script file (a TorchScript-compatible subset of Python) compiled to one IR graph
// per function, each callable as a kiln::Function on the reference interpreter.
//
//   auto m = kiln::script_file("model.py");
//   kiln::Function f = m.function("forward");
//   std::vector<kiln::IValue> out = f.call({x, int64_t(3)});
//
// Every error in the file (syntax, names, types, op signatures) is reported before anything runs, as
// `file:line:col: error: message`, the source line and a caret.
#include <map>
#include <string>
#include <vector>

#include "backends/interp/function.h"

namespace kiln {

class ScriptModule {
 public:
  ScriptModule() = default;
  explicit ScriptModule(std::map<std::string, Function> functions) : functions_(std::move(functions)) {}
  // Raises kiln::Error naming the functions the file has when there is no such function.
  const Function& function(const std::string& name) const;
  bool has_function(const std::string& name) const { return functions_.count(name) != 0; }
  std::vector<std::string> function_names() const;

 private:
  std::map<std::string, Function> functions_;
};

ScriptModule script_source(const std::string& text, const std::string& name = "<script>");
ScriptModule script_file(const std::string& path);

namespace script {
// Lexes, parses and lowers without building Functions: what `kiln check` and the fuzzer run.
void check_source(const std::string& text, const std::string& name);
}  // namespace script

}  // namespace kiln
