// Every layer of eager's registry (eager/nn/registry.h) is scriptable with no frontend entry of its own:
// this file names no layer. Each one is written into a model file from its registered sample, built by the
// script frontend, and compared with the same layer built in eager from the same arguments: parameters by
// name, outputs and gradients in training and evaluation mode, and compile() of the scripted forward.
#include "eager/nn/losses.h"
#include "eager/nn/registry.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

std::string model_file(const nn::LayerSpec& spec) {
  std::string args, inputs;
  for (const auto& [k, v] : spec.example_args) args += (args.empty() ? "" : ", ") + k + "=" + v.repr();
  for (const auto& [k, m] : spec.example_modules) args += (args.empty() ? "" : ", ") + k + "=" + m.first;
  for (const std::string& n : spec.inputs) inputs += (inputs.empty() ? "" : ", ") + n;
  return "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        self.layer = nn." + spec.name + "(" + args + ")\n\n    def forward(self, " + inputs + "):\n        return self.layer(" +
         inputs + ")" +
         // a layer with a state returns a tuple whose first element is what eager's forward(x) returns
         (spec.results > 1 ? "[0]" : "") + "\n";
}

// The sample inputs: one tensor, or all of a layer whose forward takes several (a loss's input and target).
Tensors sample_inputs(const nn::LayerSpec& spec) { return spec.example_inputs ? spec.example_inputs() : Tensors{spec.example_input()}; }

// The layer called on its inputs: through the script method, or the eager module (a loss has its own call).
Tensor call_eager(const nn::LayerSpec& spec, nn::Module& m, const Tensors& xs) {
  if (spec.eager_call) return spec.eager_call(m, xs);
  if (xs.size() == 1) return m(xs[0]);
  return dynamic_cast<nn::Loss&>(m)(xs[0], xs[1]);
}

}  // namespace

TEST_CASE("layer registry: every registered eager layer scripts, equal to eager in values and gradients") {
  REQUIRE(nn::layer_registry().size() >= 18);
  for (const nn::LayerSpec& spec : nn::layer_registry()) {
    CAPTURE(spec.name);
    auto net = script_source(model_file(spec), spec.name + ".py").module("Net");
    std::map<std::string, std::shared_ptr<nn::Module>> modules;
    for (const auto& [k, m] : spec.example_modules) modules[k] = m.second();
    std::shared_ptr<nn::Module> eager = spec.make(nn::bind_layer_args(spec, {}, spec.example_args, modules));
    // the scripted layer's tensors, under torch's names, into the eager twin
    std::map<std::string, Tensor> state;
    for (const auto& [k, t] : net->state_dict()) state[k.substr(std::string("layer.").size())] = t;
    CHECK(state.size() == eager->state_dict().size());
    eager->load_state_dict(state);
    for (bool training : {true, false}) {
      CAPTURE(training);
      net->train(training);
      eager->train(training);
      manual_seed(1);
      Tensors xs = sample_inputs(spec);
      Tensor x = xs[0];
      // an integer input (Embedding's indices) has no gradient
      bool float_in = is_floating(x.dtype());
      Tensor xa = x.detach().clone(), xb = x.detach().clone();
      if (float_in) {
        xa.requires_grad_();
        xb.requires_grad_();
      }
      Tensors ia = xs, ib = xs;
      ia[0] = xa;
      ib[0] = xb;
      manual_seed(2);
      Tensor ya = call_eager(spec, *eager, ia);
      manual_seed(2);
      std::vector<IValue> args(ib.begin(), ib.end());
      Tensor yb = ib.size() == 1 ? (*net)(xb) : net->call(args)[0].to_tensor();
      check_close(yb, ya, 1e-6, 1e-6);
      Tensor w = randn(ya.sizes());
      sum(mul(ya, w)).backward();
      sum(mul(yb, w)).backward();
      if (float_in) check_close(xb.grad(), xa.grad(), 1e-5, 1e-6);
      std::map<std::string, Tensor> scripted_params;
      for (const auto& [name, p] : net->named_parameters()) scripted_params[name] = p;
      for (const auto& [name, p] : eager->named_parameters()) {
        CAPTURE(name);
        Tensor scripted = scripted_params.at("layer." + name);
        REQUIRE(scripted.grad().defined());
        check_close(scripted.grad(), p.grad(), 1e-5, 1e-6);
      }
      eager->zero_grad();
      net->zero_grad();
    }
    // buffers (BatchNorm's running statistics) moved alike in the training call
    std::map<std::string, Tensor> scripted_buffers;
    for (const auto& [name, t] : net->named_buffers()) scripted_buffers[name] = t;
    for (const auto& [name, t] : eager->named_buffers()) {
      CAPTURE(name);
      check_close(scripted_buffers.at("layer." + name), t, 1e-6, 1e-6);
    }
    net->eval();
    Tensors xs = sample_inputs(spec);
    check_close(compile(net->method())(xs)[0], net->method()(xs)[0], 1e-5, 1e-6);
  }
}

TEST_CASE("layer registry: constructor arguments bind with torch's names, defaults and errors") {
  const nn::LayerSpec* lin = nn::find_layer("Linear");
  REQUIRE(lin);
  auto m = lin->make(nn::bind_layer_args(*lin, {IValue(3), IValue(2)}, {{"bias", IValue(false)}}));
  CHECK(m->named_parameters().size() == 1);
  check_error([&] { nn::bind_layer_args(*lin, {IValue(3)}, {}); }, "nn.Linear() is missing required argument 'out_features'");
  check_error([&] { nn::bind_layer_args(*lin, {IValue(3), IValue(2)}, {{"bais", IValue(false)}}); },
              "nn.Linear() got an unexpected keyword argument 'bais'");
  check_error([&] { lin->make(nn::bind_layer_args(*lin, {IValue(0), IValue(2)}, {})); }, "nn.Linear: in_features must be positive, got 0");
  const char* bad = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.pool = nn.MaxPool2d(2, return_indices=True)\n\n    def forward(self, x):\n        return self.pool(x)\n";
  check_error([&] { script_source(bad, "bad.py").module("Net"); }, "nn.MaxPool2d: return_indices=True is not supported");
  CHECK(nn::find_layer("Conv3d") == nullptr);
  const char* same = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                     "        self.c = nn.Conv2d(2, 3, 4, padding='same', stride=2)\n\n    def forward(self, x):\n        return self.c(x)\n";
  check_error([&] { script_source(same, "same.py").module("Net"); },
              "same.py:7:21: error: Conv2d: padding='same' is not supported for strided convolutions, got stride [2,2]");
}

TEST_CASE("layer registry: nn.Identity takes any arguments and ignores them; BatchNorm1d checks its rank when the graph runs") {
  const char* src = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.id = nn.Identity(3, 'x', unused=True)\n        self.bn = nn.BatchNorm1d(3)\n\n"
                    "    def forward(self, x):\n        return self.bn(self.id(x))\n";
  auto net = script_source(src, "id.py").module("Net");
  net->eval();
  Tensor x = randn({2, 3});
  check_close((*net)(x), x / std::sqrt(1.0 + 1e-5), 1e-6, 1e-6);
  check_error([&] { (*net)(randn({2, 3, 4, 5})); }, "BatchNorm1d: expected 2D or 3D input");
  check_error([&] { nn::BatchNorm1d(3).forward(randn({2, 3, 4, 5})); }, "BatchNorm1d: expected 2D or 3D input, got shape [2,3,4,5]");
}
