// nn.EmbeddingBag / F.embedding_bag: modes sum, mean and max over bags of a 1-D input cut at offsets (empty bags,
// include_last_offset) or of a 2-D input's rows, per_sample_weights, padding_idx; values and weight gradients
// PyTorch 1.13 printed (tests/gen_embedding_bag_values.py over the same seq() inputs), torch's errors, and the
// layer in a script module, equal to eager and compiled.
#include <string>

#include "eager/autograd/gradcheck.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::seq;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& s) { return tensor(v, s, DType::Float64); }
Tensor i64(const std::vector<int64_t>& v) { return tensor(v, {int64_t(v.size())}); }

}  // namespace

TEST_CASE("F.embedding_bag: sum / mean / max over offsets with an empty bag, weight gradients as torch") {
  Tensor idx = i64({1, 2, 4, 5, 2, 3, 9, 2}), offsets = i64({0, 2, 2, 5});
  const char* modes[] = {"sum", "mean", "max"};
  const Tensor want[] = {f64({1.7877710725, 1.77205458924, 1.59804574715, 0, 0, 0, -0.577227056855, -0.930758704113,
                  -1.20114844837, 2.22201879452, 1.64856417888, 0.927848234969},
                  {4, 3}), f64({0.893885536248, 0.886027294618, 0.799022873573, 0, 0, 0, -0.192409018952, -0.310252901371,
                  -0.400382816122, 0.740672931508, 0.549521392959, 0.30928274499},
                  {4, 3}),
                         f64({0.946300087687, 0.963558185417, 0.999573603042, 0, 0, 0, 0.946300087687, 0.80849640382,
                  0.598472144104, 0.946300087687, 0.80849640382, 0.598472144104},
                  {4, 3})};
  const Tensor want_grad[] = {f64({0, 0, 0, 0.198669330795, 0.783326909627, 0.999573603042, -0.537812755007, 0.651180091149,
                  1.53391276547, 0.215119988088, 0.793667863849, 0.99894134184, -0.95160207389, -0.925814682328,
                  -0.464602179414, -0.95160207389, -0.925814682328, -0.464602179414, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                  0.215119988088, 0.793667863849, 0.99894134184},
                  {10, 3}), f64({0, 0, 0, 0.0993346653975, 0.391663454814, 0.499786801521, -0.146159363203, 0.347614515321,
                  0.677899855663, 0.0717066626959, 0.264555954616, 0.33298044728, -0.317200691297, -0.308604894109,
                  -0.154867393138, -0.317200691297, -0.308604894109, -0.154867393138, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                  0.0717066626959, 0.264555954616, 0.33298044728},
                  {10, 3}), f64({0, 0, 0, 0, 0.783326909627, 0.999573603042, -0.537812755007, -0.132146818479, 0.534339162426, 0, 0,
                  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
                  {10, 3})};
  for (int m = 0; m < 3; ++m) {
    CAPTURE(modes[m]);
    Tensor w = seq({10, 3}).requires_grad_();
    Tensor y = embedding_bag(idx, w, offsets, modes[m]);
    check_close(y, want[m], 1e-9, 1e-9);
    sum(y * seq({4, 3}, 0.7, 0.2)).backward();
    check_close(w.grad(), want_grad[m], 1e-9, 1e-9);
  }
}

TEST_CASE("F.embedding_bag: include_last_offset, per_sample_weights, padding_idx, 2-D input; gradients; errors") {
  Tensor idx = i64({1, 2, 4, 5, 2, 3, 9, 2}), offsets = i64({0, 2, 2, 5}), w = seq({10, 3});
  check_close(embedding_bag(idx, w, i64({0, 3, 3, 8}), "sum", {}, true),
              f64({1.25793493159, 1.01525209393, 0.681879810396, 0, 0, 0, 2.17462787858, 1.47460797007,
                  0.642865723353},
                  {3, 3}), 1e-9, 1e-9);
  check_close(embedding_bag(idx, w, i64({0, 2, 5}), "sum", seq({8}, 0.9, 0.4)),
              f64({1.23949943136, 1.15426055906, 0.965915028707, -1.1858512124, -1.26459522216, -1.23037670701,
                  -0.383065934814, -0.0845101782957, 0.221594620757},
                  {3, 3}), 1e-9, 1e-9);
  check_close(embedding_bag(idx, w, offsets, "mean", {}, false, 2),
              f64({0.841470984808, 0.963558185417, 0.999573603042, 0, 0, 0, -0.761763572271, -0.869627553966,
                  -0.899810296235, 0.637859353418, 0.420033887528, 0.164688045432},
                  {4, 3}), 1e-9, 1e-9);
  check_close(embedding_bag(idx, w, offsets, "max", {}, false, 2),
              f64({0.841470984808, 0.963558185417, 0.999573603042, 0, 0, 0, -0.529836140908, -0.756802495308,
                  -0.88345465572, 0.94073055668, 0.798487112623, 0.584917192892},
                  {4, 3}), 1e-9, 1e-9);
  Tensor idx2 = idx.reshape({2, 4});
  check_close(embedding_bag(idx2, w, {}, "mean", {}, false, 2),
              f64({-0.227352053245, -0.258565640838, -0.266682329809, 0.637859353418, 0.420033887528, 0.164688045432},
                  {2, 3}), 1e-9, 1e-9);
  check_close(embedding_bag(idx2, w, {}, "max"), f64({0.946300087687, 0.963558185417, 0.999573603042, 0.946300087687, 0.80849640382, 0.598472144104},
                  {2, 3}), 1e-9, 1e-9);
  CHECK(gradcheck([&](const Tensors& in) { return embedding_bag(idx, in[0], i64({0, 2, 5}), "sum", in[1]); },
                  {seq({10, 3}).requires_grad_(), seq({8}, 0.9, 0.4).requires_grad_()}));
  CHECK(gradcheck([&](const Tensors& in) { return embedding_bag(idx2, in[0], {}, "mean", {}, false, 2); },
                  {seq({10, 3}).requires_grad_()}));
  check_error([&] { embedding_bag(idx, w, offsets, "median"); }, "embedding_bag: mode has to be one of sum, mean or max, got 'median'");
  check_error([&] { embedding_bag(idx, w, offsets, "mean", seq({8})); },
              "embedding_bag: per_sample_weights is only supported for mode='sum' (got mode='mean')");
  check_error([&] { embedding_bag(idx2, w, offsets); }, "embedding_bag: if input is 2D, then offsets has to be None");
  check_error([&] { embedding_bag(idx, w); }, "embedding_bag: offsets has to be a 1D Tensor but got None");
  check_error([&] { nn::EmbeddingBag(10, 3, "avg"); }, "EmbeddingBag: mode has to be one of sum, mean or max, got 'avg'");
}

TEST_CASE("nn.Embedding max_norm: the looked-up rows renormalised in the weight as torch, the lookup's gradient") {
  nn::Embedding emb(6, 3, std::nullopt, 1.0);
  emb.load_state_dict({{"weight", seq({6, 3}) * 2.0}});
  Tensor idx2 = tensor(std::vector<int64_t>{0, 2, 2, 5}, {2, 2});
  Tensor y = emb(idx2);
  check_close(y, f64({0.131470214076, 0.512823406711, 0.848367611741, 0.685199716343, 0.585418424631, 0.433343448569,
                  0.685199716343, 0.585418424631, 0.433343448569, -0.601064990085, -0.594267098833, -0.534385097519},
                  {2, 2, 3}).to(DType::Float32), 1e-6, 1e-6);
  sum(y * seq({2, 2, 3}, 0.7, 0.2, DType::Float32)).backward();
  check_close(emb.weight, f64({0.131470214076, 0.512823406711, 0.848367611741, 1.68294196962, 1.92711637083, 1.99914720608,
                  0.685199716343, 0.585418424631, 0.433343448569, 0.669976300312, 0.0831613248666, -0.511082204054,
                  -1.05967228182, -1.51360499062, -1.8323318735, -0.601064990085, -0.594267098833, -0.534385097519},
                  {6, 3}).to(DType::Float32), 1e-6, 1e-6);
  check_close(emb.weight.grad(), f64({0.198669330795, 0.783326909627, 0.999573603042, 0, 0, 0, -0.205896861713, -0.784694674268,
                  -0.994438320322, 0, 0, 0, 0, 0, 0, 0.215119988088, 0.793667863849, 0.99894134184},
                  {6, 3}).to(DType::Float32), 1e-6, 1e-6);
  nn::Embedding l1(6, 3, std::nullopt, 0.5, 1.0);
  l1.load_state_dict({{"weight", seq({6, 3})}});
  check_close(l1(idx2), f64({0.0440388614684, 0.171781563791, 0.284179530628, 0.201060778433, 0.171781571646, 0.127157628674,
                  0.201060778433, 0.171781571646, 0.127157628674, -0.17374660256, -0.171781572939, -0.154471807016},
                  {2, 2, 3}).to(DType::Float32), 1e-6, 1e-6);
  // scripted: the renormalised rows written back to the module's weight after the call
  const char* src = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.emb = nn.Embedding(6, 3, max_norm=1.0)\n\n    def forward(self, idx):\n        return self.emb(idx)\n";
  auto net = script_source(src, "renorm.py").module("Net");
  net->load_state_dict({{"emb.weight", seq({6, 3}) * 2.0}});
  check_close(net->call({idx2})[0].to_tensor(), emb(idx2), 1e-6, 1e-6);
  check_close(net->state_dict().at("emb.weight"), emb.weight, 1e-6, 1e-6);
}

TEST_CASE("nn.EmbeddingBag in a script module: offsets and per_sample_weights by keyword, equal to eager and compiled") {
  const char* src = R"(
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(10, 3, mode='sum', padding_idx=2)
        self.rows = nn.EmbeddingBag(10, 3, mode='max')

    def forward(self, idx, offsets, w):
        return self.bag(idx, offsets, per_sample_weights=w), self.rows(idx.view(2, 4))
)";
  auto net = script_source(src, "bag.py").module("Net");
  auto state = net->state_dict();
  CHECK(state.count("bag.weight") == 1);
  CHECK(state.at("bag.weight").select(0, 2).abs().sum().item<double>() == 0.0);  // the padding row starts at zero
  nn::EmbeddingBag bag(10, 3, "sum", false, 2), rows(10, 3, "max");
  bag.load_state_dict({{"weight", state.at("bag.weight")}});
  rows.load_state_dict({{"weight", state.at("rows.weight")}});
  Tensor idx = i64({1, 2, 4, 5, 2, 3, 9, 2}), offsets = i64({0, 2, 2, 5}), psw = seq({8}, 0.9, 0.4, DType::Float32);
  Tensor want0 = bag.forward(idx, offsets, psw), want1 = rows(idx.reshape({2, 4}));
  auto got = net->call({idx, offsets, psw})[0].elements();
  check_close(got[0].to_tensor(), want0, 1e-6, 1e-6);
  check_close(got[1].to_tensor(), want1, 1e-6, 1e-6);
  NoGradGuard no_grad;
  auto got_c = compile(net->method()).call({idx, offsets, psw})[0].elements();
  check_close(got_c[0].to_tensor(), want0, 1e-6, 1e-6);
  check_close(got_c[1].to_tensor(), want1, 1e-6, 1e-6);
}

// A 1-D input is a segment reduction: forward and backward hold tensors of the looked-up rows' and the output's size,
// where a [bags, indices, dim] mask would take 8 times the bound here.
TEST_CASE("F.embedding_bag over offsets: memory of the input's rows and the output, not of bags x indices x dim") {
  const int64_t n = 1024, bags = 256, dim = 32;
  Tensor w = randn({100, dim}).requires_grad_();
  std::vector<int64_t> idx(static_cast<size_t>(n)), off(static_cast<size_t>(bags));
  for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = (i * 37) % 100;
  for (int64_t k = 0; k < bags; ++k) off[size_t(k)] = k * (n / bags) - (k % 3 == 1 ? 1 : 0);  // uneven bags
  Tensor input = tensor(idx, {n}), offsets = tensor(off, {bags});
  for (const char* mode : {"sum", "mean", "max"}) {
    CAPTURE(mode);
    w.set_grad(Tensor());
    int64_t before = memory_stats().current_bytes;
    reset_peak_memory_stats();
    Tensor y = embedding_bag(input, w, offsets, mode);
    y.sum().backward();
    CHECK(y.sizes() == Shape{bags, dim});
    const int64_t rows_and_output = (n + bags) * dim * int64_t(sizeof(float));
    CHECK(memory_stats().peak_bytes - before < 24 * rows_and_output);
  }
}
