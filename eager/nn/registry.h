#pragma once
// The torch.nn layers, each registered once beside its class (eager/nn/layers.cpp): torch's name, its
// constructor arguments with torch's names and defaults, how to build it from them, and its forward over
// a GraphBuilder. The script frontend builds and lowers every registered layer from this table alone, so a
// layer added to eager is scriptable with no frontend edit.
//
// A layer's forward is written once, as a function template over the builder (eager/builder.h), found by
// argument-dependent lookup:
//
//   template <class B> Val<B> forward_with(B& b, Linear& m, Val<B> x) {
//     return composite::linear(b, x, b.parameter(m.weight, "weight"), b.parameter(m.bias, "bias"));
//   }
//   Tensor Linear::forward(const Tensor& x) { return eager_forward(*this, x); }
//
// and registered with layer_spec<Linear>(...), which lowers the same template for scripts.
#include <fmt/format.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ir/ivalue.h"
#include "eager/builder.h"
#include "eager/nn/module.h"

namespace kiln::nn {

// One constructor argument: torch's name and its default (none: the argument is required).
struct LayerParam {
  std::string name;
  std::optional<IValue> default_value = std::nullopt;
};

// A layer's constructor arguments bound by name, defaults filled in. The accessors raise kiln::Error
// naming the layer and the argument (`nn.Linear: in_features must be an int, got str`).
class LayerArgs {
 public:
  LayerArgs(std::string layer, std::map<std::string, IValue> values, std::map<std::string, std::shared_ptr<Module>> modules = {})
      : layer_(std::move(layer)), values_(std::move(values)), modules_(std::move(modules)) {}
  const IValue& operator[](std::string_view name) const;
  bool is_none(std::string_view name) const { return (*this)[name].is_none(); }
  int64_t integer(std::string_view name) const;
  int64_t positive(std::string_view name) const;  // an int > 0
  double number(std::string_view name) const;     // an int or a float
  bool flag(std::string_view name) const;
  std::string str(std::string_view name) const;
  Shape ints(std::string_view name) const;        // an int or a tuple/list of ints
  Shape pair(std::string_view name) const;        // ints(), one value standing for both (torch's _pair)
  Tensor tensor_or_none(std::string_view name) const;  // a Tensor, or undefined for None
  // A module argument (nn.TransformerEncoder's encoder_layer) of class M, or null for None.
  template <class M>
  std::shared_ptr<M> module_or_none(std::string_view name, std::string_view cls) const {
    auto it = modules_.find(std::string(name));
    if (it == modules_.end()) {
      if (is_none(name)) return nullptr;
      fail(fmt::format("{} must be an nn.{}, got {}", name, cls, (*this)[name].type_name()));
    }
    auto m = std::dynamic_pointer_cast<M>(it->second);
    if (!m) fail(fmt::format("{} must be an nn.{}, got nn.{}", name, cls, it->second->name()));
    return m;
  }
  // A flag torch has that kiln does not implement: raises unless it has its default (false).
  void unsupported_if_true(std::string_view name) const;
  [[noreturn]] void fail(const std::string& msg) const;
  const std::string& layer() const { return layer_; }

 private:
  std::string layer_;
  std::map<std::string, IValue> values_;
  std::map<std::string, std::shared_ptr<Module>> modules_;  // their values_ entry is None
};

struct LayerSpec {
  std::string name;  // torch.nn's class name
  std::vector<LayerParam> params;
  std::function<std::shared_ptr<Module>(const LayerArgs&)> make;
  // forward(x) lowered into a graph (the same template the eager forward runs)
  std::function<GraphBuilder::V(GraphBuilder& b, Module& m, GraphBuilder::V x)> lower;
  // a sample for tests that build and run every registered layer: constructor arguments by name and an input
  std::map<std::string, IValue> example_args;
  std::function<Tensor()> example_input;
  bool ignores_extra_args = false;  // nn.Identity(*args, **kwargs)
  // A forward of several tensors (the losses' forward(input, target)): their names, in order, and the
  // lowering and sample inputs that take them all; `lower` and `example_input` are then unset.
  std::vector<std::string> inputs = {"input"};
  std::function<GraphBuilder::V(GraphBuilder& b, Module& m, const std::vector<GraphBuilder::V>& xs)> lower_inputs;
  std::function<Tensors()> example_inputs;
  // forward(input, hx) of a layer that takes an initial state (the recurrent layers and cells): hx flattened
  // (empty when absent or None, else h_0 or h_0, c_0), `results` tensors back, which nest as torch's do: one
  // is a tensor, two (a, b), three (a, (b, c)). The first is what `lower` gives. Null for the other layers.
  std::function<std::vector<GraphBuilder::V>(GraphBuilder& b, Module& m, GraphBuilder::V x,
                                             const std::vector<GraphBuilder::V>& hx)>
      lower_with_state;
  int results = 1;
  // The recurrent layers' forward of a packed batch (torch.nn.utils.rnn), as lowered code keeps one: padded
  // steps [T, N, *] time-major in the caller's batch order and lengths [N]; results as lower_with_state's,
  // the first the padded output (zero past each length). Null for the other layers.
  std::function<std::vector<GraphBuilder::V>(GraphBuilder& b, Module& m, GraphBuilder::V padded, GraphBuilder::V lengths,
                                             const std::vector<GraphBuilder::V>& hx)>
      lower_packed;
  // forward(...) with optional tensors and flags beside its tensors (nn.MultiheadAttention, the Transformer
  // layers): torch's names and defaults in `call_params` (no default: a tensor; None: an optional tensor; a
  // bool: a flag, which a script gives as a constant). `lower_call` takes the tensors in that order (null for
  // None and at flags) and the flags by name, and gives `results` values, null for None; two or more make a
  // tuple. `eager_call` is its eager twin over the sample inputs (`inputs`, `example_inputs`), first result.
  std::vector<LayerParam> call_params;
  std::function<std::vector<GraphBuilder::V>(GraphBuilder& b, Module& m, const std::vector<GraphBuilder::V>& tensors,
                                             const std::map<std::string, bool>& flags)>
      lower_call;
  std::function<Tensor(Module& m, const Tensors& xs)> eager_call;
  // Constructor arguments that are modules (nn.TransformerEncoder's encoder_layer) in the sample: the Python
  // expression that builds one in a script and an eager one.
  std::map<std::string, std::pair<std::string, std::function<std::shared_ptr<Module>()>>> example_modules;
};

// Every registered layer, in registration order.
const std::vector<LayerSpec>& layer_registry();
const LayerSpec* find_layer(std::string_view name);

// Binds positional and keyword arguments to spec.params as Python does; raises with torch's wording
// (`nn.Linear() takes 3 positional arguments but 4 were given`, `... got an unexpected keyword argument`,
// `... missing required argument 'out_features'`).
// `modules`: keyword arguments that are modules.
LayerArgs bind_layer_args(const LayerSpec& spec, const std::vector<IValue>& args, const std::map<std::string, IValue>& kwargs,
                          const std::map<std::string, std::shared_ptr<Module>>& modules = {});

template <class L>
Tensor eager_forward(L& layer, const Tensor& x) {
  EagerBuilder b;
  return forward_with(b, layer, x);
}

template <class L>
LayerSpec layer_spec(std::string name, std::vector<LayerParam> params, std::function<std::shared_ptr<Module>(const LayerArgs&)> make,
                     std::map<std::string, IValue> example_args, std::function<Tensor()> example_input) {
  return LayerSpec{std::move(name), std::move(params), std::move(make),
                   [](GraphBuilder& b, Module& m, GraphBuilder::V x) { return forward_with(b, static_cast<L&>(m), x); },
                   std::move(example_args), std::move(example_input)};
}

// A layer whose forward takes several tensors, written as forward_with(B&, L&, const std::vector<Val<B>>&).
template <class L>
LayerSpec multi_input_layer_spec(std::string name, std::vector<LayerParam> params,
                                 std::function<std::shared_ptr<Module>(const LayerArgs&)> make, std::vector<std::string> inputs,
                                 std::map<std::string, IValue> example_args, std::function<Tensors()> example_inputs) {
  LayerSpec s{std::move(name), std::move(params), std::move(make), nullptr, std::move(example_args), nullptr};
  s.inputs = std::move(inputs);
  s.lower_inputs = [](GraphBuilder& b, Module& m, const std::vector<GraphBuilder::V>& xs) {
    return forward_with(b, static_cast<L&>(m), xs);
  };
  s.example_inputs = std::move(example_inputs);
  return s;
}

}  // namespace kiln::nn
