// F.scaled_dot_product_attention, nn.MultiheadAttention and the Transformer layers against PyTorch 1.13
// (tests/script/models/make_attention_fixtures.py: values and gradients of torch's modules with the same
// state_dict, and of softmax(q @ k^T * scale + mask) @ v written out, since 1.13 has no SDPA), eager,
// traced, scripted and compiled; and torch's errors for masks and shapes. The registry's test scripts every
// layer from its sample.
#include <cmath>
#include <optional>

#include "eager/io.h"
#include "eager/nn/attention.h"
#include "eager/ops.h"
#include "jit/compiled_function.h"
#include "jit/train_step.h"
#include "script_frontend/script.h"
#include "tracer/trace.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

const std::string kModels = std::string(KILN_TEST_DATA) + "/../script/models/";

const std::map<std::string, Tensor>& fixtures() {
  static const std::map<std::string, Tensor> data = load_safetensors(kModels + "data/attention.safetensors");
  return data;
}

// A case's inputs in order: floats with a gradient, bool masks as bool, absent ones undefined.
Tensors inputs_of(const std::string& name, int n) {
  const auto& d = fixtures();
  Tensors r;
  for (int i = 0; i < n; ++i) {
    std::string k = std::to_string(i);
    if (d.count(name + ".input." + k)) r.push_back(d.at(name + ".input." + k).clone().requires_grad_());
    else if (d.count(name + ".bool." + k)) r.push_back(d.at(name + ".bool." + k).to(DType::Bool));
    else r.emplace_back();
  }
  return r;
}

// outputs equal torch's; then sum(output.0 * w) backward: the inputs' and parameters' gradients equal torch's
void check_case(const std::string& name, const Tensors& inputs, const Tensors& outputs, nn::Module* m = nullptr) {
  const auto& d = fixtures();
  CAPTURE(name);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string k = name + ".output." + std::to_string(i);
    CAPTURE(k);
    if (!d.count(k)) {
      CHECK_FALSE(outputs[i].defined());
      continue;
    }
    check_close(outputs[i], d.at(k), 1e-4, 1e-5);
  }
  sum(mul(outputs[0], d.at(name + ".w"))).backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string k = name + ".dinput." + std::to_string(i);
    CAPTURE(k);
    if (!d.count(k)) continue;
    REQUIRE(inputs[i].grad().defined());
    check_close(inputs[i].grad(), d.at(k), 1e-4, 1e-5);
  }
  if (!m) return;
  auto grads = kiln::test::with_prefix(d, name + ".grad.");
  for (const auto& [k, p] : m->named_parameters()) {
    CAPTURE(k);
    REQUIRE(grads.count(k));
    REQUIRE(p.grad().defined());
    check_close(p.grad(), grads.at(k), 1e-4, 1e-5);
  }
  CHECK(grads.size() == m->named_parameters().size());
}

template <class M>
std::shared_ptr<M> loaded(const std::string& name, std::shared_ptr<M> m) {
  m->load_state_dict(kiln::test::with_prefix(fixtures(), name + ".state."));
  return m;
}

nn::TransformerConfig small(bool batch_first = false, bool norm_first = false, const char* activation = "relu") {
  return nn::TransformerConfig{8, 2, 16, 0.0, activation, 1e-5, batch_first, norm_first};
}

}  // namespace

TEST_CASE("scaled_dot_product_attention: PyTorch's values and gradients, bool, float and causal masks, any batch dims") {
  struct C {
    const char* name;
    int n;
    bool causal;
    std::optional<double> scale;
  };
  for (C c : {C{"sdpa0", 3, false, {}}, C{"sdpa1", 4, false, {}}, C{"sdpa2", 4, false, {}}, C{"sdpa3", 3, true, {}},
              C{"sdpa4", 3, false, 0.5}}) {
    Tensors x = inputs_of(c.name, c.n);
    Tensor mask = c.n > 3 ? x[3] : Tensor();
    check_case(c.name, x, {scaled_dot_product_attention(x[0], x[1], x[2], mask, 0.0, c.causal, c.scale)});
  }
}

TEST_CASE("scaled_dot_product_attention: scripted, traced and compiled equal eager, dropout_p drawn per run") {
  const char* src =
      "import torch\nimport torch.nn.functional as F\nfrom torch import Tensor\nfrom typing import Tuple\n\n\n"
      "def f(q: Tensor, k: Tensor, v: Tensor, m: Tensor) -> Tuple[Tensor, Tensor]:\n"
      "    a = F.scaled_dot_product_attention(q, k, v, attn_mask=m)\n"
      "    b = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)\n"
      "    return a, b\n";
  auto file = script_source(src, "sdpa.py");
  Function f = file.function("f");
  Function fc = compile(f);
  manual_seed(3);
  Tensor q = randn({2, 4, 8}), k = randn({2, 6, 8}), v = randn({2, 6, 5});
  for (Tensor m : {gt(rand({4, 6}), 0.3), randn({2, 1, 6})}) {
    if (m.dtype() == DType::Bool) m = logical_or(m, eq(arange(Scalar(0), Scalar(6), Scalar(1)), 0));  // every row attends somewhere
    Tensor a = scaled_dot_product_attention(q, k, v, m), b = scaled_dot_product_attention(q, k, v, {}, 0.0, true, 0.3);
    for (Function* g : {&f, &fc}) {
      std::vector<IValue> r = g->call({q, k, v, m})[0].elements();
      check_close(r[0].to_tensor(), a, 1e-5, 1e-6);
      check_close(r[1].to_tensor(), b, 1e-5, 1e-6);
    }
    Function t = trace([](const Tensors& xs) { return Tensors{scaled_dot_product_attention(xs[0], xs[1], xs[2], xs[3])}; }, {q, k, v, m});
    check_close(t.call({q, k, v, m})[0].to_tensor(), a, 1e-5, 1e-6);
  }
  // the same graph serves another length (the causal mask's positions cut when the graph runs)
  Tensor q2 = randn({3, 2, 7, 8}), k2 = randn({3, 2, 9, 8}), v2 = randn({3, 2, 9, 4});
  check_close(fc.call({q2, k2, v2, randn({7, 9})})[0].elements()[1].to_tensor(), scaled_dot_product_attention(q2, k2, v2, {}, 0.0, true, 0.3), 1e-5,
              1e-6);
  // dropout: kept weights scaled by 1 / (1 - p), so the mean output over many draws nears the plain one
  Tensor y = scaled_dot_product_attention(q, k, v, {}, 0.5);
  CHECK(y.sizes() == Shape{2, 4, 5});
}

TEST_CASE("scaled_dot_product_attention: torch's errors") {
  Tensor q = randn({2, 4, 8}), k = randn({2, 5, 8}), v = randn({2, 5, 3});
  check_error([&] { scaled_dot_product_attention(q, k, v, zeros({4, 5}, DType::Bool), 0.0, true); },
              "scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True");
  check_error([&] { scaled_dot_product_attention(q, randn({2, 5, 7}), v); }, "query's last dim (8) must equal key's (7)");
  check_error([&] { scaled_dot_product_attention(q, k, randn({2, 6, 3})); }, "key and value must have the same sequence length");
  check_error([&] { scaled_dot_product_attention(randn({8}), k, v); }, "query must be at least 2-D, got 1-D");
  check_error([&] { scaled_dot_product_attention(q, k, v, {}, 1.5); }, "dropout_p has to be between 0 and 1, but got 1.5");
  check_error([&] { scaled_dot_product_attention(q, k, v, zeros({4, 4})); },
              "scaled_dot_product_attention: attn_mask of shape [4,4] does not broadcast to the attention's shape [2,4,5]");
}

TEST_CASE("MultiheadAttention: PyTorch's outputs, weights and gradients; masks, kdim/vdim, batch_first, no bias") {
  {
    auto m = loaded("mha0", std::make_shared<nn::MultiheadAttention>(8, 2));
    Tensors x = inputs_of("mha0", 1);
    auto [y, w] = m->forward(x[0], x[0], x[0], {});
    check_case("mha0", x, {y, w}, m.get());
  }
  {
    auto m = loaded("mha1", std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, false, false, 6, 5));
    CHECK(m->state_dict().count("q_proj_weight") == 1);
    CHECK(m->state_dict().count("in_proj_weight") == 0);
    Tensors x = inputs_of("mha1", 5);
    auto [y, w] = m->forward(x[0], x[1], x[2], x[4], true, x[3], false);
    CHECK(w.sizes() == Shape{3, 2, 4, 5});
    check_case("mha1", x, {y, w}, m.get());
  }
  {
    auto m = loaded("mha2", std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, false, false, false, 0, 0, true));
    Tensors x = inputs_of("mha2", 4);
    auto [y, w] = m->forward(x[0], x[1], x[2], {}, true, x[3]);
    check_case("mha2", x, {y, w}, m.get());
  }
}

TEST_CASE("MultiheadAttention: torch's parameter names, shapes and initialisation") {
  manual_seed(0);
  nn::MultiheadAttention m(16, 4);
  auto sd = m.state_dict();
  CHECK(sd.size() == 4);
  CHECK(sd.at("in_proj_weight").sizes() == Shape{48, 16});
  CHECK(sd.at("out_proj.weight").sizes() == Shape{16, 16});
  CHECK(max(abs(sd.at("in_proj_bias"))).item<float>() == 0.0f);
  CHECK(max(abs(sd.at("out_proj.bias"))).item<float>() == 0.0f);
  double bound = std::sqrt(6.0 / (48 + 16));  // xavier_uniform_
  CHECK(max(abs(sd.at("in_proj_weight"))).item<float>() <= bound);
  CHECK(max(abs(sd.at("in_proj_weight"))).item<float>() > 0.8 * bound);
  nn::MultiheadAttention sep(8, 2, 0.0, false, false, false, 3, 5);
  CHECK(sep.state_dict().size() == 4);  // q/k/v_proj_weight and out_proj.weight
  CHECK(sep.state_dict().at("v_proj_weight").sizes() == Shape{8, 5});
}

TEST_CASE("MultiheadAttention: masks of the wrong shape and other errors name the layer and shapes") {
  nn::MultiheadAttention m(8, 2);
  Tensor q = randn({4, 3, 8}), k = randn({5, 3, 8});
  check_error([&] { m.forward(q, k, k, {}, true, zeros({4, 4})); },
              "nn.MultiheadAttention: the shape of the 2D attn_mask is [4,4], but should be [4,5]");
  check_error([&] { m.forward(q, k, k, {}, true, zeros({3, 4, 5})); },
              "nn.MultiheadAttention: the shape of the 3D attn_mask is [3,4,5], but should be [6,4,5]");
  check_error([&] { m.forward(q, k, k, zeros({3, 4}, DType::Bool)); },
              "nn.MultiheadAttention: expecting key_padding_mask shape of [3,5], but got [3,4]");
  check_error([&] { m.forward(q, k, k, {}, true, {}, true, true); }, "need attn_mask if specifying the is_causal hint");
  check_error([&] { m.forward(randn({4, 8}), k, k, {}); },
              "nn.MultiheadAttention: for unbatched (2-D) query, expected key and value to be 2-D, but got key of dim 3 and value of dim 3");
  check_error([&] { m.forward(randn({4, 3, 2, 8}), k, k, {}); }, "nn.MultiheadAttention: query should be unbatched 2D or batched 3D tensor");
  check_error([&] { m.forward(q, randn({5, 3, 7}), k, {}); }, "key's last dim must be 8, got [5,3,7]");
  check_error([] { nn::MultiheadAttention(10, 3); }, "embed_dim must be divisible by num_heads");
}

TEST_CASE("Transformer layers: PyTorch's outputs and gradients with the same state_dict") {
  const auto& d = fixtures();
  Tensor sq = nn::Transformer::generate_square_subsequent_mask(4);
  check_close(sq, d.at("square_mask"), 0, 0);
  {
    auto e = loaded("enc0", std::make_shared<nn::TransformerEncoderLayer>(small()));
    Tensors x = inputs_of("enc0", 3);
    check_case("enc0", x, {e->forward(x[0], nn::AttentionMasks{x[1], x[2]})}, e.get());
  }
  {
    auto e = loaded("enc1", std::make_shared<nn::TransformerEncoderLayer>(small(true, true, "gelu")));
    Tensors x = inputs_of("enc1", 1);
    check_case("enc1", x, {e->forward(x[0])}, e.get());
  }
  {
    nn::TransformerEncoderLayer layer(small());
    auto e = loaded("enc2", std::make_shared<nn::TransformerEncoder>(layer, 2, std::make_shared<nn::LayerNorm>(Shape{8})));
    CHECK(e->state_dict().count("layers.1.self_attn.in_proj_weight") == 1);
    CHECK(e->state_dict().count("norm.weight") == 1);
    Tensors x = inputs_of("enc2", 2);
    check_case("enc2", x, {e->forward(x[0], nn::AttentionMasks{x[1]})}, e.get());
  }
  {
    auto dl = loaded("dec0", std::make_shared<nn::TransformerDecoderLayer>(small()));
    Tensors x = inputs_of("dec0", 3);
    check_case("dec0", x, {dl->forward(x[0], x[1], nn::AttentionMasks{x[2]})}, dl.get());
  }
  {
    auto t = loaded("tr0", std::make_shared<nn::Transformer>(small(), 1, 2));
    Tensors x = inputs_of("tr0", 3);
    check_case("tr0", x, {t->forward(x[0], x[1], {}, nn::AttentionMasks{x[2]})}, t.get());
  }
}

TEST_CASE("TransformerEncoder: deep copies of the layer, equal at first and independent") {
  nn::TransformerEncoderLayer layer(small());
  nn::TransformerEncoder e(layer, 3);
  auto sd = e.state_dict();
  check_close(sd.at("layers.2.linear1.weight"), layer.state_dict().at("linear1.weight"), 0, 0);
  CHECK(e.layers[0]->linear1->weight.data_ptr<float>() != e.layers[1]->linear1->weight.data_ptr<float>());
  check_error([] { nn::TransformerEncoderLayer(nn::TransformerConfig{8, 2, 16, 0.1, "tanh"}); }, "activation should be relu/gelu, not tanh");
}

TEST_CASE("attention model file: word_language_model's encoder and MultiheadAttention calls equal PyTorch, compiled") {
  const auto& d = fixtures();
  auto file = script_file(kModels + "attention_lm.py");
  {
    auto net = file.module("TransformerModel", {IValue(11), IValue(8), IValue(2), IValue(16), IValue(2), IValue(0.0)});
    net->load_state_dict(kiln::test::with_prefix(d, "lm.state."));
    CHECK(net->state_dict().count("transformer_encoder.layers.1.self_attn.in_proj_weight") == 1);
    Tensors x = {d.at("lm.input.0"), d.at("lm.input.1")};
    Tensor y = net->call({x[0], x[1]})[0].to_tensor();
    check_case("lm", {}, {y}, net.get());
    NoGradGuard ng;
    check_close(compile(net->method()).call({x[0], x[1]})[0].to_tensor(), d.at("lm.output.0"), 1e-4, 1e-5);
  }
  {
    auto net = file.module("Attend", {IValue(8), IValue(2)});
    net->load_state_dict(kiln::test::with_prefix(d, "attend.state."));
    Tensors x = inputs_of("attend", 4);
    std::vector<IValue> r = net->call({x[0], x[1], x[2], x[3]});
    std::vector<IValue> parts = r.size() == 1 ? r[0].elements() : r;
    check_case("attend", x, {parts[0].to_tensor(), parts[1].to_tensor()}, net.get());
  }
}

TEST_CASE("attention model file: three SGD steps of word_language_model's encoder LM equal PyTorch, eager and compiled") {
  const auto& d = fixtures();
  auto file = script_file(kModels + "attention_lm.py");
  const Tensor &src = d.at("lm.input.0"), &mask = d.at("lm.input.1"), &tgt = d.at("lm_sgd.target");
  for (bool compiled : {false, true}) {
    CAPTURE(compiled);
    auto net = file.module("TransformerModel", {IValue(11), IValue(8), IValue(2), IValue(16), IValue(2), IValue(0.0)});
    net->load_state_dict(kiln::test::with_prefix(d, "lm.state."));
    optim::SGD opt(net->parameters(), {0.1});
    auto loss_of = [&](const Tensors& b) {
      return nll_loss(net->call({b[0], b[1]})[0].to_tensor().reshape({-1, 11}), b[2].reshape({-1}));
    };
    std::optional<CompiledTrainStep> step;
    if (compiled) step.emplace(*net, loss_of, opt);
    for (int i = 0; i < 3; ++i) {
      Tensor loss;
      if (compiled) {
        loss = (*step)({src, mask, tgt});
      } else {
        loss = loss_of({src, mask, tgt});
        opt.zero_grad();
        loss.backward();
        opt.step();
      }
      check_close(loss.detach(), d.at("lm_sgd.loss." + std::to_string(i)), 1e-4, 1e-5);
    }
    for (const auto& [k, v] : kiln::test::with_prefix(d, "lm_sgd.trained.")) {
      INFO(k);
      check_close(net->state_dict().at(k), v, 1e-4, 1e-5);
    }
  }
}

TEST_CASE("MultiheadAttention in a script: torch's forward arguments and errors") {
  const char* src =
      "import torch.nn as nn\nfrom torch import Tensor\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
      "        super().__init__()\n        self.attn = nn.MultiheadAttention(8, 2)\n\n"
      "    def forward(self, x: Tensor, flag: bool):\n        return self.attn(x, x, x, need_weights=flag)[0]\n";
  check_error([&] { script_source(src, "flag.py").module("Net"); }, "need_weights must be a bool constant in kiln script");
  std::string bad = std::string(src).replace(std::string(src).find("need_weights=flag"), 17, "needweights=True");
  check_error([&] { script_source(bad, "kw.py").module("Net"); }, "got an unexpected keyword argument 'needweights'");
  check_error([&] { script_source(std::string(src).replace(std::string(src).find("(8, 2)"), 6, "(8, 3)"), "h.py").module("Net"); },
              "embed_dim must be divisible by num_heads");
}

TEST_CASE("nn.Transformer in a script: generate_square_subsequent_mask of a length read when the graph runs") {
  const char* src =
      "import torch.nn as nn\nfrom torch import Tensor\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
      "        super().__init__()\n        self.transformer = nn.Transformer(8, 2, 1, 1, 16, 0.0)\n\n"
      "    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:\n"
      "        mask = self.transformer.generate_square_subsequent_mask(tgt.size(0))\n"
      "        return self.transformer(src, tgt, tgt_mask=mask)\n";
  auto net = script_source(src, "tr.py").module("Net");
  nn::Transformer eager(small(), 1, 1);
  std::map<std::string, Tensor> state;
  for (const auto& [k, t] : net->state_dict()) state[k.substr(std::string("transformer.").size())] = t;
  eager.load_state_dict(state);
  Function compiled = compile(net->method());
  for (int64_t L : {3, 6}) {
    Tensor src_ = randn({5, 2, 8}), tgt = randn({L, 2, 8});
    Tensor want = eager.forward(src_, tgt, {}, nn::AttentionMasks{nn::Transformer::generate_square_subsequent_mask(L)});
    check_close((*net).call({src_, tgt})[0].to_tensor(), want, 1e-5, 1e-6);
    check_close(compiled.call({src_, tgt})[0].to_tensor(), want, 1e-5, 1e-6);
  }
}

TEST_CASE("nn.MultiheadAttention add_bias_kv / add_zero_attn on unbatched inputs: torch's state_dict keys, values and gradients") {
  // tests/script/models/attention_kv.py against PyTorch 1.13 (make_attention_kv_fixtures.py): eager, scripted, compiled
  std::map<std::string, Tensor> data = load_safetensors(kModels + "data/attention_kv.safetensors");
  std::map<std::string, Tensor> state = kiln::test::with_prefix(data, "state.");
  auto net = script_file(kModels + "attention_kv.py").module("KV", {IValue(8), IValue(2)});
  std::vector<std::string> keys, want_keys;
  for (const auto& [k, v] : net->state_dict()) keys.push_back(k);
  for (const auto& [k, v] : state) want_keys.push_back(k);
  CHECK(keys == want_keys);
  net->load_state_dict(state);
  Tensor q = data.at("input.0").clone().requires_grad_(), qb = data.at("input.4").clone().requires_grad_();
  Tensor pad = data.at("input.3").to(DType::Bool);
  std::vector<IValue> in{q, data.at("input.1"), data.at("input.2"), pad, qb};
  Tensors out = kiln::test::flat(net->call(in));
  REQUIRE(out.size() == 6);
  Tensor loss;
  for (size_t k = 0; k < out.size(); ++k) {
    CAPTURE(k);
    check_close(out[k], data.at("output." + std::to_string(k)), 1e-5, 1e-6);
    Tensor term = sum(mul(out[k], data.at("weight." + std::to_string(k))));
    loss = k == 0 ? term : add(loss, term);
  }
  loss.backward();
  check_close(q.grad(), data.at("grad.q"), 1e-5, 1e-6);
  check_close(qb.grad(), data.at("grad.qb"), 1e-5, 1e-6);
  for (const auto& [name, p] : net->named_parameters()) {
    CAPTURE(name);
    check_close(p.grad(), data.at("grad." + name), 1e-5, 1e-6);
  }
  {
    Function compiled = compile(net->method());
    NoGradGuard no_grad;
    Tensors got = kiln::test::flat(compiled.call(in));
    for (size_t k = 0; k < got.size(); ++k) check_close(got[k], data.at("output." + std::to_string(k)), 1e-5, 1e-6);
  }
  // eager: the same layer, the same outputs
  nn::MultiheadAttention attn(8, 2, 0.0, true, true, true);
  attn.load_state_dict(kiln::test::with_prefix(state, "attn."));
  auto [o, w] = attn.forward(data.at("input.0"), data.at("input.1"), data.at("input.2"), pad);
  check_close(o, data.at("output.0"), 1e-5, 1e-6);
  check_close(w, data.at("output.1"), 1e-5, 1e-6);
  check_error([&] { attn.forward(data.at("input.0"), data.at("input.4"), data.at("input.4"), {}); },
              "for unbatched (2-D) query, expected key and value to be 2-D, but got key of dim 3 and value of dim 3");
}

TEST_CASE("attention masks of the wrong shape in a script graph of unknown shapes fail naming the layer when it runs") {
  const char* src =
      "import torch.nn as nn\nfrom torch import Tensor\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
      "        super().__init__()\n        self.attn = nn.MultiheadAttention(8, 2)\n"
      "        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0), 1)\n\n"
      "    def forward(self, x: Tensor, mask: Tensor, which: int) -> Tensor:\n"
      "        if which == 0:\n            return self.attn(x, x, x, attn_mask=mask)[0]\n"
      "        return self.enc(x, mask)\n";
  auto net = script_source(src, "masks.py").module("Net");
  Tensor x = randn({4, 3, 8});
  // the right shapes, 2-D and 3-D, run
  CHECK(net->call({x, zeros({4, 4}), IValue(int64_t(0))})[0].to_tensor().sizes() == Shape{4, 3, 8});
  CHECK(net->call({x, zeros({6, 4, 4}), IValue(int64_t(0))})[0].to_tensor().sizes() == Shape{4, 3, 8});
  CHECK(net->call({x, zeros({4, 4}), IValue(int64_t(1))})[0].to_tensor().sizes() == Shape{4, 3, 8});
  check_error([&] { net->call({x, zeros({4, 5}), IValue(int64_t(0))}); },
              "nn.MultiheadAttention: the shape of attn_mask should be (L, S) or (N * num_heads, L, S)");
  check_error([&] { net->call({x, zeros({5, 4, 4}), IValue(int64_t(0))}); },
              "nn.MultiheadAttention: the shape of attn_mask should be (L, S) or (N * num_heads, L, S)");
  check_error([&] { net->call({x, zeros({3, 4}), IValue(int64_t(1))}); },
              "nn.MultiheadAttention 'layers.0.self_attn': the shape of attn_mask should be");
}
