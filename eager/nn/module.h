#pragma once
// nn::Module: named parameters, buffers and children (PyTorch's state_dict names: "0.weight",
// "features.3.bias", ...), train/eval, and state_dict save/load as safetensors.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "eager/profiler/profile_hooks.h"

namespace kiln::nn {

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  // Calls forward; under a Profiler, inside a scope named after this module, and between the hooks below
  // when any are registered (one thread-local load and one pointer test otherwise).
  Tensor operator()(const Tensor& x) { return profile_hooks() || hooks_ ? hooked_forward(x) : forward(x); }
  virtual std::string name() const = 0;

  // Each parameter once, under the first name that holds it (a tied weight is one parameter, as torch's).
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  std::vector<Tensor> parameters(bool recurse = true) const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();
  // Moves every parameter and buffer to `device` in place (torch's module.to): the tensors keep their
  // identity, requires_grad and place in optimizers; gradients are dropped.
  Module& to(Device device);
  // Floating parameters and buffers converted in place (torch's module.to(dtype), .double(), .half());
  // integer buffers (num_batches_tracked) keep theirs; gradients are dropped, as by to(device).
  Module& to(DType dtype);

  // Parameters and buffers by dotted name. Loading copies values into the existing tensors (so
  // optimizers keep their references) and checks names, shapes and dtypes.
  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);
  void save(const std::string& path) const;  // safetensors
  // A safetensors file, or a torch.save file (recognised by content) holding a state_dict or a dict with
  // one under "model", "state_dict" or "model_state_dict", as training scripts save checkpoints.
  void load(const std::string& path, bool strict = true);

  // torch's register_forward_pre_hook / register_forward_hook: run by operator() before and after forward,
  // in the order registered. A forward hook may return a tensor that replaces the output (an undefined
  // one keeps it). kiln::dist's FullyShardedDataParallel gathers and frees a unit's parameters here.
  using ForwardPreHook = std::function<void(Module& module, const Tensor& input)>;
  using ForwardHook = std::function<Tensor(Module& module, const Tensor& input, const Tensor& output)>;
  void register_forward_pre_hook(ForwardPreHook hook);
  void register_forward_hook(ForwardHook hook);

  // torch's `layer.weight = other.weight`: the parameter `name` of this module becomes `t` (weight tying).
  // Layers whose forward reads a member (Embedding::weight) keep the old tensor there; script modules,
  // which lower through the parameters, see the new one.
  void replace_parameter(const std::string& name, Tensor t);

 protected:
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    // a name registered again keeps its place and takes the new module, as torch's _modules[name] = m
    for (auto& [n, c] : children_)
      if (n == name) {
        c = m;
        return m;
      }
    children_.emplace_back(name, m);
    return m;
  }

 private:
  struct Hooks {
    std::vector<ForwardPreHook> pre;
    std::vector<ForwardHook> post;
  };
  Tensor hooked_forward(const Tensor& x);
  void collect(const std::string& prefix, bool params, bool recurse,
               std::vector<std::pair<std::string, Tensor>>& out) const;
  std::vector<std::pair<std::string, Tensor>> all_named_parameters() const;  // tied ones under every name
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::shared_ptr<Hooks> hooks_;  // null until a hook is registered
};

}  // namespace kiln::nn
