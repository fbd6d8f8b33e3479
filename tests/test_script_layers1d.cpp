// nn.Conv1d (eager conv1d over conv2d), nn.BatchNorm1d and nn.Embedding(padding_idx): eager layers against
// loops worked out here, the script layers against the eager ones, and tests/script/models/token_cnn.py
// (all of them with in-place ops and a dict of outputs) against PyTorch's fixtures.
#include <map>
#include <string>

#include "eager/conv1d.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::seq;
using kiln::test::values;

namespace {
// conv1d by its definition, in float64.
Tensor conv1d_loops(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t pad, int64_t dil,
                    int64_t groups) {
  int64_t N = x.size(0), C = x.size(1), L = x.size(2), O = w.size(0), K = w.size(2), Cg = C / groups, Og = O / groups;
  int64_t Lo = (L + 2 * pad - dil * (K - 1) - 1) / stride + 1;
  auto xv = values(x), wv = values(w), bv = values(b);
  std::vector<double> out(size_t(N * O * Lo));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t l = 0; l < Lo; ++l) {
        double s = bv[size_t(o)];
        int64_t g = o / Og;
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t k = 0; k < K; ++k) {
            int64_t p = l * stride - pad + k * dil;
            if (p < 0 || p >= L) continue;
            s += xv[size_t((n * C + g * Cg + c) * L + p)] * wv[size_t((o * Cg + c) * K + k)];
          }
        out[size_t((n * O + o) * Lo + l)] = s;
      }
  return tensor(out, {N, O, Lo}, DType::Float64);
}

std::map<std::string, Tensor> part(const std::map<std::string, Tensor>& all, const std::string& prefix) {
  std::map<std::string, Tensor> out;
  for (const auto& [k, v] : all)
    if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = v;
  return out;
}
}  // namespace

TEST_CASE("conv1d: matches its definition (stride, padding, dilation, groups), batched and unbatched, with grads") {
  Tensor x = seq({2, 4, 9}, 0.37, 0.2, DType::Float32);
  Tensor w = seq({6, 2, 3}, 0.71, -0.4, DType::Float32);
  Tensor b = seq({6}, 1.3, 0.5, DType::Float32);
  check_close(conv1d(x, w, b, 2, 1, 2, 2), conv1d_loops(x, w, b, 2, 1, 2, 2), 1e-5, 1e-5);
  check_close(conv1d(x.select(0, 1), w, b, 1, 0, 1, 2), conv1d_loops(x.slice(0, 1, 2), w, b, 1, 0, 1, 2).squeeze(0), 1e-5,
              1e-5);
  Tensor wg = w.detach().requires_grad_(true);
  sum(conv1d(x, wg, b, 1, 1, 1, 2)).backward();
  // d(sum)/dw[o, c, k] is the sum of the inputs that tap k sees: compare with the same conv's grad via conv2d
  Tensor w4 = w.unsqueeze(2).detach().requires_grad_(true);
  sum(conv2d(x.unsqueeze(2), w4, b, {1, 1}, {0, 1}, {1, 1}, 2)).backward();
  check_close(wg.grad(), w4.grad().squeeze(2), 1e-5, 1e-5);
  test::check_error([&] { conv1d(x.unsqueeze(0), w); }, "conv1d: expected a 2D (unbatched) or 3D (batched) input");
}

TEST_CASE("nn.BatchNorm1d and nn.Embedding(padding_idx): eager layers and their script lowering agree") {
  const char* src = R"(
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 4, padding_idx=-1)
        self.conv = nn.Conv1d(4, 3, 3, padding=1, groups=1)
        self.bn = nn.BatchNorm1d(3)
        self.bn2 = nn.BatchNorm1d(3, affine=False)

    def forward(self, idx):
        h = self.bn(self.conv(self.emb(idx).transpose(1, 2)))
        return self.bn2(h.mean(dim=2)), h
)";
  auto net = script_source(src, "t.py").module("Net");
  auto params = net->named_parameters();
  Tensor emb_w;
  for (auto& [n, t] : params)
    if (n == "emb.weight") emb_w = t;
  REQUIRE(emb_w.defined());
  CHECK(values(emb_w.select(0, 5)) == std::vector<double>(4, 0.0));  // the padding row starts at zero
  Tensor idx = tensor(std::vector<int64_t>{5, 1, 2, 5, 0, 3, 4, 5}, {2, 4});
  // training mode: batch statistics; the eager layers on the same parameters give the same values
  net->train();
  auto out = net->call({idx});
  auto tup = out[0].elements();
  nn::Embedding emb(6, 4, 5);
  nn::Conv1d conv(4, 3, 3, 1, 1);
  nn::BatchNorm1d bn(3), bn2(3, 1e-5, 0.1, false);
  std::map<std::string, Tensor> state = net->state_dict();
  emb.load_state_dict(part(state, "emb."));
  conv.load_state_dict(part(state, "conv."));
  Tensor h = bn(conv(emb(idx).transpose(1, 2)));
  check_close(tup[1].to_tensor(), h, 1e-5, 1e-6);
  check_close(tup[0].to_tensor(), bn2(mean(h, {2})), 1e-5, 1e-6);
  // running statistics were written back by the scripted call, as the eager layer updated its own
  check_close(net->state_dict().at("bn.running_mean"), bn.running_mean, 1e-5, 1e-6);
  CHECK(net->state_dict().at("bn.num_batches_tracked").item<int64_t>() == 1);
  // the padding row gets no gradient, the others do
  net->zero_grad();
  Tensor h_script = tup[1].to_tensor();
  sum(h_script * h_script).backward();
  Tensor g = emb_w.grad();
  REQUIRE(g.defined());
  CHECK(values(g.select(0, 5)) == std::vector<double>(4, 0.0));
  CHECK(values(sum(abs(g.select(0, 1))))[0] > 0);
}

TEST_CASE("script module: a token CNN (Embedding padding_idx, Conv1d, BatchNorm1d, class attribute, in-place ops, "
          "dict outputs) matches PyTorch and trains with kiln's SGD") {
  std::string dir = std::string(KILN_TEST_DATA) + "/../script/models/";
  auto net = script_file(dir + "token_cnn.py").module("TokenCNN", {int64_t(20), int64_t(8), int64_t(3)});
  auto data = load_safetensors(dir + "data/token_cnn.safetensors");
  net->load_state_dict(part(data, "state."));
  const Tensor& tokens = data.at("input.0");
  const char* names[] = {"0.logits", "1.pooled", "2.scores"};
  net->eval();
  {
    NoGradGuard no_grad;
    auto out = net->call({tokens})[0].elements();  // the dict's values, in its order
    REQUIRE(out.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      INFO(names[i]);
      check_close(out[i].to_tensor(), data.at(std::string("output.0.") + names[i]), 1e-4, 1e-5);
    }
    Function compiled = compile(net->method());
    auto cout = compiled.call({tokens})[0].elements();
    for (size_t i = 0; i < 3; ++i) check_close(cout[i].to_tensor(), data.at(std::string("output.0.") + names[i]), 1e-4, 1e-5);
  }
  net->train();
  optim::SGD opt(net->parameters(), {0.1});
  for (int step = 0; step < 3; ++step) {
    Tensor logits = net->call({tokens})[0].elements()[0].to_tensor();
    if (step == 0) check_close(logits, data.at("train_output.0"), 1e-4, 1e-5);
    Tensor loss = cross_entropy(logits, data.at("target.0"));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  auto trained = part(data, "trained.");
  auto mine = net->state_dict();
  REQUIRE(mine.size() == trained.size());
  for (const auto& [k, v] : trained) {
    INFO(k);
    check_close(mine.at(k), v, 1e-4, 1e-5);
  }
}
