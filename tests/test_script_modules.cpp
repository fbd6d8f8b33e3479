// script(): model files written as PyTorch users write them (tests/script/models/*.py), built with
// module("Class", args), loaded with the PyTorch state_dict saved by tests/script/models/make_fixtures.py,
// and compared with PyTorch's eager outputs (which that script checked against torch.jit.script) on
// the interpreter and through compile(); training steps with kiln's SGD against PyTorch's.
#include <map>
#include <string>

#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

const std::string kModels = std::string(KILN_TEST_DATA) + "/../script/models/";


struct Model {
  std::shared_ptr<ScriptedModule> net;
  std::map<std::string, Tensor> data;
};

Model build(const std::string& file, const std::string& cls, const std::vector<IValue>& args = {}) {
  Model m;
  m.net = script_file(kModels + file + ".py").module(cls, args);
  m.data = load_safetensors(kModels + "data/" + file + ".safetensors");
  m.net->load_state_dict(kiln::test::with_prefix(m.data, "state."));  // strict: the key names are PyTorch's
  return m;
}

const Tensor& at(const Model& m, const std::string& key) {
  auto it = m.data.find(key);
  REQUIRE_MESSAGE(it != m.data.end(), "fixture lacks " << key);
  return it->second;
}

// The eval-mode outputs on the interpreter and compiled (without grad, so the JIT's kernels run
// rather than the interpreter that records autograd).
void check_eval(Model& m, const std::vector<std::vector<IValue>>& calls) {
  m.net->eval();
  Function compiled = compile(m.net->method());
  NoGradGuard no_grad;
  for (size_t k = 0; k < calls.size(); ++k) {
    const Tensor& want = at(m, "output." + std::to_string(k));
    check_close(m.net->call(calls[k])[0].to_tensor(), want, 1e-4, 1e-5);
    check_close(compiled.call(calls[k])[0].to_tensor(), want, 1e-4, 1e-5);
  }
  jit::CacheStats st = compile_stats(compiled);
  CHECK(st.eager_calls == 0);
  CHECK(st.misses >= 1);
}

// Three SGD steps on cross_entropy in training mode, as make_fixtures.py took them in PyTorch.
void check_training(Model& m) {
  m.net->train();
  optim::SGD opt(m.net->parameters(), {0.1});
  const Tensor& x = at(m, "input.0");
  for (int step = 0; step < 3; ++step) {
    Tensor y = (*m.net)(x);
    if (step == 0) check_close(y, at(m, "train_output.0"), 1e-4, 1e-5);
    Tensor loss = cross_entropy(y, at(m, "target.0"));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  std::map<std::string, Tensor> trained = kiln::test::with_prefix(m.data, "trained.");
  std::map<std::string, Tensor> mine = m.net->state_dict();
  REQUIRE(mine.size() == trained.size());
  for (const auto& [k, v] : trained) {
    INFO(k);
    REQUIRE(mine.count(k));
    check_close(mine.at(k), v, 1e-4, 1e-5);
  }
}

}  // namespace

TEST_CASE("script module: an MLP from nn.Sequential(*layers) matches PyTorch and trains with kiln's SGD") {
  Model m = build("mlp", "MLP", {int64_t(12), int64_t(16), int64_t(3)});
  std::vector<std::string> names;
  for (const auto& [n, t] : m.net->named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias", "head.weight",
                                          "head.bias"});
  check_eval(m, {{at(m, "input.0")}});
  check_training(m);
}

TEST_CASE("script module: LeNet with dropout and log_softmax matches PyTorch in eval mode") {
  Model m = build("lenet", "LeNet");
  check_eval(m, {{at(m, "input.0")}});
  // In training mode dropout draws a new mask at each call; eval() turns it off again.
  m.net->train();
  manual_seed(7);
  Tensor a = (*m.net)(at(m, "input.0"));
  Tensor b = (*m.net)(at(m, "input.0"));
  CHECK(test::values(a) != test::values(b));
  m.net->eval();
  check_close((*m.net)(at(m, "input.0")), at(m, "output.0"), 1e-4, 1e-5);
}

TEST_CASE("script module: a ResNet of BasicBlocks (BatchNorm, ModuleList, optional downsample) matches PyTorch") {
  Model m = build("resnet", "ResNet");
  check_eval(m, {{at(m, "input.0")}});
  // Training mode normalises with batch statistics and updates the running ones in place.
  check_training(m);
}

TEST_CASE("script module: a transformer encoder layer (LayerNorm, softmax attention, mask) matches PyTorch") {
  Model m = build("transformer", "EncoderLayer", {int64_t(16), int64_t(4), int64_t(32)});
  check_eval(m, {{at(m, "input.0"), IValue()}, {at(m, "input.0"), at(m, "input.1")}});
}

TEST_CASE("script module: __init__ as vision_transformer writes it: an OrderedDict filled by key, a Sequential's item by name, "
          "a conv's kernel_size as a tuple") {
  const char* src =
      "from collections import OrderedDict\n\nimport torch.nn as nn\nfrom torch import Tensor\n\n\n"
      "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
      "        self.conv = nn.Conv2d(3, 4, 2, stride=2)\n"
      "        layers: OrderedDict[str, nn.Module] = OrderedDict()\n"
      "        for i in range(2):\n            layers[f\"fc_{i}\"] = nn.Linear(4, 4)\n"
      "        layers[\"fc_0\"] = nn.Linear(4, 4, bias=False)\n"
      "        self.body = nn.Sequential(layers)\n"
      "        self.fan_in = self.conv.in_channels * self.conv.kernel_size[0] * self.conv.kernel_size[1]\n"
      "        self.stride = self.conv.stride\n"
      "        if isinstance(self.body.fc_1, nn.Linear):\n            nn.init.zeros_(self.body.fc_1.bias)\n\n"
      "    def forward(self, x: Tensor) -> Tensor:\n        return self.body(x) * self.fan_in\n";
  auto net = script_source(src, "vit_init.py").module("Net");
  auto sd = net->state_dict();
  CHECK(sd.count("body.fc_0.weight") == 1);
  CHECK(sd.count("body.fc_0.bias") == 0);  // the second assignment replaced the first, as in Python
  CHECK(sd.count("body.fc_1.bias") == 1);
  Tensor x = randn({2, 4});
  Tensor want = mul(add(matmul(matmul(x, sd.at("body.fc_0.weight").transpose(0, 1)), sd.at("body.fc_1.weight").transpose(0, 1)),
                        sd.at("body.fc_1.bias")),
                    12.0);
  check_close((*net)(x), want, 1e-5, 1e-5);
}

TEST_CASE("script module: torch._assert in forward, its f-string message written out as an assert's (vision_transformer)") {
  const char* src =
      "import torch\nimport torch.nn as nn\nfrom torch import Tensor\n\n\n"
      "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = 4\n\n"
      "    def forward(self, x: Tensor) -> Tensor:\n"
      "        torch._assert(x.dim() == 2, f\"Expected width {self.w}, got {x.shape}\")\n"
      "        torch._assert(x.size(1) == self.w, \"wrong width\")\n"
      "        return x * 2\n";
  auto net = script_source(src, "assert.py").module("Net");
  Tensor x = randn({3, 4});
  check_close((*net)(x), mul(x, 2.0), 0, 0);
  check_error([&] { (*net)(randn({3, 4, 1})); }, "assert.py:12: AssertionError: Expected width 4, got {x.shape}");
  check_error([&] { (*net)(randn({3, 5})); }, "assert.py:13: AssertionError: wrong width");
}
