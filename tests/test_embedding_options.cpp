// F.embedding / nn.Embedding's max_norm (norm_type), scale_grad_by_freq and sparse, eager and in script, against
// PyTorch 1.13: tests/gen_embedding_options_values.py made the numbers (an index twice in the batch, a gradient
// that differs per element, so a missing or wrong frequency scale shows).
#include <string>
#include <vector>

#include "error_of.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

struct Expected {
  std::vector<double> out, weight_after, grad;
};

Tensor start_weight() {
  std::vector<double> w;
  for (int i = 0; i < 15; ++i) w.push_back((i - 7.0) / 4.0);
  return tensor(w, {5, 3});
}
Tensor indices() { return tensor(std::vector<int64_t>{0, 2, 0, 3, 0, 2}, {2, 3}); }
Tensor coef() {
  std::vector<double> c;
  for (int i = 0; i < 18; ++i) c.push_back(i / 10.0 - 0.5);
  return tensor(c, {2, 3, 3});
}
void check_against(const Tensor& out, const Tensor& weight, const Tensor& grad, const Expected& e) {
  check_close(out, tensor(e.out, {2, 3, 3}), 1e-5, 1e-6);
  check_close(weight, tensor(e.weight_after, {5, 3}), 1e-5, 1e-6);
  REQUIRE(grad.defined());
  check_close(grad, tensor(e.grad, {5, 3}), 1e-5, 1e-6);
}

const Expected kAll{{-0.583333, -0.5, -0.416667, -0.25, 0.0, 0.25, -0.583333, -0.5, -0.416667, 0.333333, 0.5, 0.666667, -0.583333, -0.5,
                     -0.416667, -0.25, 0.0, 0.25},
                    {-0.583333, -0.5, -0.416667, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.333333, 0.5, 0.666667, 1.25, 1.5, 1.75},
                    {0.1, 0.2, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.4, 0.5, 0.6, 0.0, 0.0, 0.0}};

}  // namespace

TEST_CASE("embedding options: F.embedding's max_norm, norm_type and scale_grad_by_freq match PyTorch") {
  struct Case {
    const char* name;
    std::optional<int64_t> pad;
    std::optional<double> max_norm;
    double norm_type;
    bool freq;
    Expected e;
  };
  const std::vector<double> lookup_grad{0.3, 0.6, 0.9, 0.0, 0.0, 0.0, 0.8, 1.0, 1.2, 0.4, 0.5, 0.6, 0.0, 0.0, 0.0};
  std::vector<Case> cases{
      {"renorm2", {}, 1.0, 2.0, false,
       {{-0.667424, -0.572078, -0.476731, -0.25, 0.0, 0.25, -0.667424, -0.572078, -0.476731, 0.371391, 0.557086, 0.742781, -0.667424,
         -0.572078, -0.476731, -0.25, 0.0, 0.25},
        {-0.667424, -0.572078, -0.476731, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.371391, 0.557086, 0.742781, 1.25, 1.5, 1.75},
        lookup_grad}},
      {"renorm1", {}, 1.5, 1.0, false,
       {{-0.583333, -0.5, -0.416667, -0.25, 0.0, 0.25, -0.583333, -0.5, -0.416667, 0.333333, 0.5, 0.666667, -0.583333, -0.5, -0.416667,
         -0.25, 0.0, 0.25},
        {-0.583333, -0.5, -0.416667, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.333333, 0.5, 0.666667, 1.25, 1.5, 1.75},
        lookup_grad}},
      {"freq", {}, {}, 2.0, true,
       {{-1.75, -1.5, -1.25, -0.25, 0.0, 0.25, -1.75, -1.5, -1.25, 0.5, 0.75, 1.0, -1.75, -1.5, -1.25, -0.25, 0.0, 0.25},
        {-1.75, -1.5, -1.25, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75},
        {0.1, 0.2, 0.3, 0.0, 0.0, 0.0, 0.4, 0.5, 0.6, 0.4, 0.5, 0.6, 0.0, 0.0, 0.0}}},
      {"all", 2, 1.5, 1.0, true, kAll},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Tensor w = start_weight().requires_grad_(true);
    Tensor y = embedding(w, indices(), c.pad, c.max_norm, c.norm_type, c.freq);
    (y * coef()).sum().backward();
    check_against(y, w, w.grad(), c.e);
  }
  // bf16 keeps its dtype through the frequency scale
  Tensor wb = start_weight().to(DType::BFloat16).requires_grad_(true);
  CHECK(embedding(wb, indices(), {}, {}, 2.0, true).dtype() == DType::BFloat16);
}

TEST_CASE("embedding options: nn.Embedding's options in eager and in script (interpreted and compiled) match PyTorch") {
  nn::Embedding emb(5, 3, 2, 1.5, 1.0, true);
  emb.load_state_dict({{"weight", start_weight()}});
  Tensor y = emb.forward(indices());
  (y * coef()).sum().backward();
  check_against(y, emb.weight, emb.weight.grad(), kAll);

  const std::string head = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n";
  const std::string layer = head +
                            "class E(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                            "        self.emb = nn.Embedding(5, 3, padding_idx=2, max_norm=1.5, norm_type=1.0, scale_grad_by_freq=True)\n"
                            "    def forward(self, x):\n        return self.emb(x)\n";
  const std::string functional = head +
                                 "class E(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                 "        self.w = nn.Parameter(torch.zeros(5, 3))\n"
                                 "    def forward(self, x):\n"
                                 "        return F.embedding(x, self.w, 2, 1.5, 1.0, scale_grad_by_freq=True)\n";
  for (const auto& [src, name] : {std::pair{layer, "emb.weight"}, std::pair{functional, "w"}}) {
    INFO(name);
    for (bool compiled : {false, true}) {
      INFO(compiled);
      auto net = script_source(src, "emb.py").module("E");
      net->load_state_dict({{name, start_weight()}});
      Tensor out = compiled ? compile(net->method()).call({indices()})[0].to_tensor() : net->forward(indices());
      (out * coef()).sum().backward();
      Tensor w = net->state_dict().at(name), g;
      for (auto& [n, t] : net->named_parameters())
        if (n == name) g = t.grad();
      check_against(out, w, g, kAll);
    }
  }
}

TEST_CASE("embedding options: sparse=True and a max_norm without a module's weight say why") {
  Tensor w = start_weight();
  check_error([&] { embedding(w, indices(), {}, {}, 2.0, false, true); },
              "embedding: sparse=True is not supported: kiln's gradients are dense (sparse=False gives the same values)");
  check_error([&] { embedding(w, indices(), {}, -1.0); }, "embedding: max_norm must be positive, got -1");
  const std::string head = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n";
  auto err = [&](const std::string& init, const std::string& fwd) {
    return kiln::test::error_of([&] {
      script_source(head + "class E(nn.Module):\n    def __init__(self):\n        super().__init__()\n        " + init +
                        "\n    def forward(self, x):\n        return " + fwd + "\n",
                    "sparse.py")
          .module("E");
    });
  };
  std::string e = err("self.emb = nn.Embedding(5, 3, sparse=True)", "self.emb(x)");
  CHECK(e.find("sparse.py:9:") == 0);
  CHECK(e.find("nn.Embedding: sparse=True is not supported: kiln's gradients are dense") != std::string::npos);
  e = err("self.w = nn.Parameter(torch.zeros(5, 3))", "F.embedding(x, self.w, sparse=True)");
  CHECK(e.find("sparse.py:11:") == 0);
  CHECK(e.find("embedding: sparse=True is not supported") != std::string::npos);
  e = err("self.w = nn.Parameter(torch.zeros(5, 3))", "F.embedding(x, self.w * 2.0, max_norm=1.0)");
  CHECK(e.find("sparse.py:11:") == 0);
  CHECK(e.find("embedding: with max_norm the weight is renormalised in place, so it must be a module's parameter") != std::string::npos);
}
