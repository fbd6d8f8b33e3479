#pragma once
// A module built from a `class Net(nn.Module)` of a kiln script file:
//
//   auto net = kiln::script_file("net.py").module("Net", {int64_t(784), int64_t(10)});
//   net->load("net.safetensors");             // a PyTorch state_dict, same key names
//   optim::SGD opt(net->parameters(), {0.1});
//   Tensor y = (*net)(x);                     // forward on the interpreter, recorded by autograd
//   net->eval();                              // dropout off, batch norm on running statistics
//   Function f = compile(net->method());      // forward through the JIT
//
// __init__ ran when the module was built; its submodules, parameters and buffers are this module's
// children, with PyTorch's state_dict names ("features.0.weight", "bn1.running_mean"). A method is
// lowered to a graph on its first call for each combination of train/eval flags of the module tree;
// the graph reads the parameters and buffers as bound inputs (so optimiser updates are seen) and, in
// training mode, writes batch norm's running statistics back after each call.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/interp/function.h"
#include "eager/nn/module.h"

namespace kiln {

namespace script {
struct File;
struct FunctionDef;
struct Object;
}  // namespace script

class ScriptedModule : public nn::Module {
 public:
  ScriptedModule(std::shared_ptr<const script::File> file, std::shared_ptr<script::Object> object);

  // forward(x) for a forward that takes one tensor and returns one.
  Tensor forward(const Tensor& x) override;
  using nn::Module::operator();
  // forward with any arguments (ints, floats, tuples, ...): one IValue per result.
  std::vector<IValue> call(const std::vector<IValue>& args, const std::string& method = "forward");
  std::string name() const override;

  // The method as a Function for the current train/eval flags: bound to this module's parameters and
  // buffers, ready for compile(). Raises kiln::Error naming the class's methods if there is none.
  Function method(const std::string& name = "forward");
  // The method with its unannotated parameters typed by these arguments, as call() with them would type
  // them: generate(idx, max_new_tokens, ...) compiled before any call has run it.
  Function method(const std::string& name, const std::vector<IValue>& args) { return method_for(method_def(name), &args); }

  // Used while __init__ runs (script_frontend/construct.cpp).
  void add_child(const std::string& name, std::shared_ptr<nn::Module> m) { register_module(name, std::move(m)); }
  void add_parameter(const std::string& name, const Tensor& t) { register_parameter(name, t); }
  void add_buffer(const std::string& name, const Tensor& t) { register_buffer(name, t); }
  const script::Object& object() const { return *object_; }
  const std::shared_ptr<script::Object>& object_ptr() const { return object_; }

 private:
  // The method called name, or an error naming the class's methods (or why it is not compiled).
  const script::FunctionDef& method_def(const std::string& name) const;
  // method(), with an unannotated parameter typed by its argument when args are given (one graph each)
  Function method_for(const script::FunctionDef& f, const std::vector<IValue>* args);
  std::shared_ptr<const script::File> file_;
  std::shared_ptr<script::Object> object_;
  std::map<std::string, Function> methods_;  // by method name and the tree's train/eval flags
};

}  // namespace kiln
