// A script class deriving from nn.Transformer (PyTorch's word_language_model TransformerModel, which replaces
// the inherited decoder and calls the inherited encoder), nn.Transformer.generate_square_subsequent_mask on the
// class and on self, and Transformer layers given callable activations: values and gradients against PyTorch
// 1.13 with the same state_dict (tests/script/models/make_transformer_subclass_fixtures.py), and compiled.
#include <set>

#include "eager/io.h"
#include "eager/ops.h"
#include "jit/compiled_function.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

const std::string kModels = std::string(KILN_TEST_DATA) + "/../script/models/";

const std::map<std::string, Tensor>& fixtures() {
  static const std::map<std::string, Tensor> data = load_safetensors(kModels + "data/transformer_subclass.safetensors");
  return data;
}

std::set<std::string> keys_of(const std::map<std::string, Tensor>& m) {
  std::set<std::string> r;
  for (const auto& [k, v] : m) r.insert(k);
  return r;
}

}  // namespace

TEST_CASE("script class deriving from nn.Transformer: torch's state_dict names, values, gradients and compiled") {
  const auto& d = fixtures();
  auto net = script_file(kModels + "transformer_subclass.py")
                 .module("TransformerModel", {IValue(11), IValue(8), IValue(2), IValue(16), IValue(2)});
  std::map<std::string, Tensor> state = kiln::test::with_prefix(d, "lm.state.");
  // the inherited decoder is replaced by the nn.Linear in place; the encoder keeps its layers and norm
  CHECK(keys_of(net->state_dict()) == keys_of(state));
  net->load_state_dict(state);
  net->eval();
  const Tensor& src = d.at("lm.input.0");
  Tensor y = net->call({src, IValue(true)})[0].to_tensor();  // call() takes every argument, has_mask too
  check_close(y, d.at("lm.output.0"), 1e-4, 1e-5);
  check_close(net->call({src, IValue(false)})[0].to_tensor(), d.at("lm.output.1"), 1e-4, 1e-5);
  nll_loss(y.reshape({-1, 11}), d.at("lm.target").reshape({-1})).backward();
  for (const auto& [name, p] : net->named_parameters()) {
    CAPTURE(name);
    check_close(p.grad(), d.at("lm.grad." + name), 1e-4, 1e-5);
  }
  NoGradGuard ng;
  check_close(compile(net->method()).call({src, IValue(true)})[0].to_tensor(), d.at("lm.output.0"), 1e-4, 1e-5);
}

TEST_CASE("Transformer encoder layers with activation=F.gelu, nn.GELU() or F.relu in a script equal PyTorch") {
  const auto& d = fixtures();
  auto file = script_file(kModels + "transformer_subclass.py");
  auto net = file.module("CallableActivations", {IValue(8), IValue(2)});
  std::map<std::string, Tensor> state = kiln::test::with_prefix(d, "act.state.");
  CHECK(keys_of(net->state_dict()) == keys_of(state));
  net->load_state_dict(state);
  Tensor x = d.at("act.input.0").clone().requires_grad_();
  Tensors out = kiln::test::flat(net->call({x}));
  REQUIRE(out.size() == 3);
  Tensor loss;
  for (size_t k = 0; k < out.size(); ++k) {
    CAPTURE(k);
    check_close(out[k], d.at("act.output." + std::to_string(k)), 1e-4, 1e-5);
    Tensor term = sum(mul(out[k], d.at("act.w." + std::to_string(k))));
    loss = k == 0 ? term : add(loss, term);
  }
  loss.backward();
  check_close(x.grad(), d.at("act.dinput.0"), 1e-4, 1e-5);
  for (const auto& [name, p] : net->named_parameters()) {
    CAPTURE(name);
    check_close(p.grad(), d.at("act.grad." + name), 1e-4, 1e-5);
  }
  NoGradGuard ng;
  Tensors compiled = kiln::test::flat(compile(net->method()).call({d.at("act.input.0")}));
  for (size_t k = 0; k < compiled.size(); ++k) check_close(compiled[k], d.at("act.output." + std::to_string(k)), 1e-4, 1e-5);
}

TEST_CASE("Transformer layers in a script: an activation other than relu or gelu names the layer") {
  auto src = [](const std::string& act) {
    return "import torch.nn as nn\nimport torch.nn.functional as F\nfrom torch import Tensor\n\n\nclass Net(nn.Module):\n"
           "    def __init__(self):\n        super().__init__()\n        self.layer = nn.TransformerEncoderLayer(8, 2, 16, 0.0, activation=" +
           act + ")\n\n    def forward(self, x: Tensor) -> Tensor:\n        return self.layer(x)\n";
  };
  check_error([&] { script_source(src("F.silu"), "act.py").module("Net"); },
              "nn.TransformerEncoderLayer: kiln supports the activation relu or gelu");
  check_error([&] { script_source(src("nn.GELU(approximate='tanh')"), "act.py").module("Net"); },
              "nn.TransformerEncoderLayer: kiln supports the activation relu or gelu");
  check_error([&] { script_source(src("'tanh'"), "act.py").module("Net"); }, "activation should be relu/gelu, not tanh");
}
