// The loss functions (eager/composite_losses.h) against float64 references written here loop by loop,
// gradcheck for each, torch's argument errors, and the nn.*Loss layers' buffers and calls. Scripted F.*
// calls are compared with PyTorch in tests/script/losses.py; the layers' scripting in test_layer_registry.cpp.
#include <cmath>
#include <vector>

#include "eager/nn/losses.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

std::vector<double> values(const Tensor& t) {
  Tensor c = t.detach().to(DType::Float64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

Tensor scalar64(double v) { return tensor(std::vector<double>{v}, {1}, DType::Float64).reshape(Shape{}); }

// torch's cross entropy on class indices [N, C], written out: weights, ignore_index, smoothing, reductions
Tensor reference_ce(const Tensor& x, const std::vector<int64_t>& t, const std::vector<double>& w, int64_t ignore, double eps,
                    const std::string& reduction) {
  int64_t n = x.size(0), c = x.size(1);
  std::vector<double> v = values(x), loss(size_t(n), 0.0);
  double nll_sum = 0, smooth_sum = 0, wsum = 0;
  for (int64_t i = 0; i < n; ++i) {
    double mx = -INFINITY, z = 0;
    for (int64_t k = 0; k < c; ++k) mx = std::max(mx, v[size_t(i * c + k)]);
    for (int64_t k = 0; k < c; ++k) z += std::exp(v[size_t(i * c + k)] - mx);
    auto lp = [&](int64_t k) { return v[size_t(i * c + k)] - mx - std::log(z); };
    if (t[size_t(i)] == ignore) continue;
    double wt = w.empty() ? 1.0 : w[size_t(t[size_t(i)])];
    double nll = -lp(t[size_t(i)]) * wt, smooth = 0;
    for (int64_t k = 0; k < c; ++k) smooth -= lp(k) * (w.empty() ? 1.0 : w[size_t(k)]);
    loss[size_t(i)] = (1 - eps) * nll + eps / double(c) * smooth;
    nll_sum += nll;
    smooth_sum += smooth;
    wsum += wt;
  }
  if (reduction == "none") return tensor(loss, {n}, DType::Float64);
  if (reduction == "sum") return scalar64((1 - eps) * nll_sum + eps / double(c) * smooth_sum);
  return scalar64(((1 - eps) * nll_sum + eps / double(c) * smooth_sum) / wsum);
}

}  // namespace

TEST_CASE("losses: cross_entropy and nll_loss with weights, ignore_index and label smoothing equal the written-out formula") {
  manual_seed(3);
  Tensor x = randn({6, 4}, DType::Float64);
  std::vector<int64_t> t = {0, 3, -100, 1, 2, 3};
  Tensor target = tensor(t, {6});
  std::vector<double> w = {0.5, 1.5, 1.0, 2.0};
  Tensor weight = tensor(w, {4}, DType::Float64);
  for (const char* r : {"mean", "sum", "none"}) {
    CAPTURE(r);
    check_close(cross_entropy(x, target, Tensor(), -100, r), reference_ce(x, t, {}, -100, 0.0, r), 1e-12, 1e-12);
    check_close(cross_entropy(x, target, weight, -100, r), reference_ce(x, t, w, -100, 0.0, r), 1e-12, 1e-12);
    check_close(cross_entropy(x, target, weight, -100, r, 0.2), reference_ce(x, t, w, -100, 0.2, r), 1e-12, 1e-12);
    check_close(nll_loss(log_softmax(x, 1), target, weight, -100, r), reference_ce(x, t, w, -100, 0.0, r), 1e-12, 1e-12);
  }
  std::vector<int64_t> t3 = {0, 3, 3, 1, 2, 3};
  check_close(cross_entropy(x, tensor(t3, {6}), Tensor(), 3, "mean", 0.1), reference_ce(x, t3, {}, 3, 0.1, "mean"), 1e-12, 1e-12);
  // every target ignored: "mean" is 0 / 0, as torch
  CHECK(std::isnan(cross_entropy(x, full({6}, -100.0).to(DType::Int64)).item<double>()));
  // an ignored position whose log-probability is -inf adds 0, not NaN
  Tensor lp = log_softmax(x, 1).detach().clone();
  lp.select(0, 2).fill_(-INFINITY);
  CHECK(std::isfinite(nll_loss(lp, target).item<double>()));
}

TEST_CASE("losses: class-probability targets, images [N, C, H, W] and gradients") {
  manual_seed(4);
  Tensor x = randn({3, 5}, DType::Float64), q = softmax(randn({3, 5}, DType::Float64), 1);
  Tensor w = rand({5}, DType::Float64);
  // -sum_c q (1 - eps) + eps / C) w log p, averaged over the samples
  std::vector<double> lp = values(log_softmax(x, 1)), qv = values(q), wv = values(w);
  double total = 0;
  for (size_t i = 0; i < 3; ++i)
    for (size_t k = 0; k < 5; ++k) total -= (qv[i * 5 + k] * 0.9 + 0.1 / 5) * wv[k] * lp[i * 5 + k];
  check_close(cross_entropy(x, q, w, -100, "mean", 0.1), scalar64(total / 3), 1e-12, 1e-12);
  // [N, C, H, W]: the class dim is 1, the weight broadcasts along it
  Tensor img = randn({2, 3, 2, 2}, DType::Float64);
  Tensor ti = randint(0, 3, {2, 2, 2});
  Tensor wi = tensor(std::vector<double>{1.0, 2.0, 0.5}, {3}, DType::Float64);
  Tensor flat = img.permute({0, 2, 3, 1}).reshape({8, 3});
  std::vector<int64_t> tv(8);
  std::vector<double> tf = values(ti);
  for (size_t i = 0; i < 8; ++i) tv[i] = int64_t(tf[i]);
  check_close(cross_entropy(img, ti, wi, -100, "mean", 0.2), reference_ce(flat, tv, {1.0, 2.0, 0.5}, -100, 0.2, "mean"), 1e-12, 1e-12);
  Tensor t = tensor(std::vector<int64_t>{1, 0, 4}, {3});
  auto g = [](const Tensor& v) { return v.detach().requires_grad_(); };
  CHECK_NOTHROW(gradcheck([&](const Tensors& in) { return cross_entropy(in[0], t, w, 0, "mean", 0.3); }, {g(x)}));
  CHECK_NOTHROW(gradcheck([&](const Tensors& in) { return cross_entropy(in[0], in[1], w, -100, "sum", 0.1); }, {g(x), g(q)}));
  CHECK_NOTHROW(gradcheck([&](const Tensors& in) { return nll_loss(in[0], t, in[1], -100, "mean"); }, {g(log_softmax(x, 1)), g(w)}));
}

TEST_CASE("losses: regression, binary and divergence losses equal their formulas, with gradients") {
  manual_seed(5);
  Tensor x = randn({3, 4}, DType::Float64), y = randn({3, 4}, DType::Float64);
  std::vector<double> xv = values(x), yv = values(y);
  double mse = 0, l1 = 0, sl1 = 0, hub = 0;
  for (size_t i = 0; i < 12; ++i) {
    double d = std::abs(xv[i] - yv[i]);
    mse += d * d, l1 += d;
    sl1 += d < 0.5 ? 0.5 * d * d / 0.5 : d - 0.25;
    hub += d <= 0.7 ? 0.5 * d * d : 0.7 * (d - 0.35);
  }
  check_close(mse_loss(x, y), scalar64(mse / 12), 1e-12, 1e-12);
  check_close(l1_loss(x, y, "sum"), scalar64(l1), 1e-12, 1e-12);
  check_close(smooth_l1_loss(x, y, "mean", 0.5), scalar64(sl1 / 12), 1e-12, 1e-12);
  check_close(huber_loss(x, y, "sum", 0.7), scalar64(hub), 1e-12, 1e-12);
  check_close(smooth_l1_loss(x, y, "sum", 0.0), l1_loss(x, y, "sum"), 1e-12, 1e-12);

  Tensor p = sigmoid(x), t = sigmoid(y * 3.0), w = sigmoid(y) + 0.5, pw = rand({4}, DType::Float64) * 3.0;
  std::vector<double> pv = values(p), tv = values(t), wv = values(w), pwv = values(pw);
  double bce = 0;
  for (size_t i = 0; i < 12; ++i) bce -= wv[i] * (tv[i] * std::log(pv[i]) + (1 - tv[i]) * std::log(1 - pv[i]));
  check_close(binary_cross_entropy(p, t, w, "sum"), scalar64(bce), 1e-10, 1e-12);
  // torch's pos_weight multiplies the positive term only: -w (pw t log p + (1 - t) log(1 - p))
  double bcel_ref = 0;
  for (size_t i = 0; i < 12; ++i)
    bcel_ref -= wv[i] * (pwv[i % 4] * tv[i] * std::log(pv[i]) + (1 - tv[i]) * std::log(1 - pv[i]));
  check_close(binary_cross_entropy_with_logits(x, t, w, "sum", pw), scalar64(bcel_ref), 1e-10, 1e-12);
  // large logits stay finite; probabilities of exactly 0 and 1 clamp the log at -100, as torch
  CHECK(std::isfinite(binary_cross_entropy_with_logits(x * 1000.0, t).item<double>()));
  Tensor edge = tensor(std::vector<double>{0.0, 1.0}, {2}, DType::Float64);
  check_close(binary_cross_entropy(edge, tensor(std::vector<double>{1.0, 0.0}, {2}, DType::Float64), Tensor(), "sum"), scalar64(200.0), 1e-12, 1e-12);

  Tensor lp = log_softmax(x, 1), q = softmax(y, 1);
  std::vector<double> lpv = values(lp), qv = values(q);
  double kl = 0;
  for (size_t i = 0; i < 12; ++i) kl += qv[i] * (std::log(qv[i]) - lpv[i]);
  check_close(kl_div(lp, q, "batchmean"), scalar64(kl / 3), 1e-12, 1e-12);
  check_close(kl_div(lp, log(q), "sum", true), scalar64(kl), 1e-12, 1e-12);
  Tensor q0 = where(gt(q, 0.3), q, 0.0);
  CHECK(std::isfinite(kl_div(lp, q0, "sum").item<double>()));

  auto grad_ok = [&](const std::function<Tensor(const Tensor&, const Tensor&)>& f, Tensor a, Tensor b) {
    CHECK_NOTHROW(gradcheck([&](const Tensors& in) { return f(in[0], in[1]); }, {a.detach().requires_grad_(), b.detach().requires_grad_()}));
  };
  grad_ok([](const Tensor& a, const Tensor& b) { return mse_loss(a, b); }, x, y);
  grad_ok([](const Tensor& a, const Tensor& b) { return smooth_l1_loss(a, b, "sum", 0.5); }, x, y);
  grad_ok([](const Tensor& a, const Tensor& b) { return huber_loss(a, b, "mean", 0.7); }, x, y);
  grad_ok([&](const Tensor& a, const Tensor& b) { return binary_cross_entropy(a, b, w); }, p, t);
  grad_ok([&](const Tensor& a, const Tensor& b) { return binary_cross_entropy_with_logits(a, b, w, "mean", pw); }, x, t);
  grad_ok([](const Tensor& a, const Tensor& b) { return kl_div(a, b, "batchmean"); }, lp, q);
}

TEST_CASE("losses: torch's argument errors") {
  Tensor x = randn({4, 3}), t = tensor(std::vector<int64_t>{0, 1, 2, 1}, {4});
  check_error([&] { cross_entropy(x, t, "avg"); }, "cross_entropy: reduction must be 'mean', 'sum' or 'none', got 'avg'");
  check_error([&] { kl_div(x, x, "avg"); }, "kl_div: reduction must be 'batchmean', 'mean', 'sum' or 'none', got 'avg'");
  check_error([&] { cross_entropy(x, tensor(std::vector<int64_t>{0, 1, 3, 1}, {4})); }, "cross_entropy: target 3 is out of bounds for 3 classes");
  check_error([&] { cross_entropy(x, t.slice(0, 0, 3)); }, "cross_entropy: expected target of shape [4] for input of shape [4,3], got [3]");
  check_error([&] { cross_entropy(x, t, ones({4})); }, "cross_entropy: weight of shape [4] does not match the 3 classes of the input");
  check_error([&] { cross_entropy(x, t, Tensor(), -100, "mean", 1.5); }, "cross_entropy: label_smoothing must be between 0.0 and 1.0, got 1.5");
  check_error([&] { nll_loss(x, t.to(DType::Int32)); }, "nll_loss: expected target of dtype int64, got int32");
  check_error([&] { binary_cross_entropy(sigmoid(x), rand({4, 1})); },
              "binary_cross_entropy: target size [4,1] must be the same as input size [4,3]");
  check_error([&] { smooth_l1_loss(x, x, "mean", -1.0); }, "smooth_l1_loss: beta must be non-negative, got -1");
  check_error([&] { huber_loss(x, x, "mean", 0.0); }, "huber_loss: delta must be positive, got 0");
  // the regression losses broadcast, as torch (after its warning)
  CHECK(mse_loss(x, zeros({3})).sizes() == Shape{});
}

TEST_CASE("losses: the nn layers take input and target, keep weight and pos_weight as buffers, and check reduction") {
  Tensor x = randn({4, 3}), t = tensor(std::vector<int64_t>{0, 1, 2, 1}, {4}), w = tensor(std::vector<float>{1, 2, 3}, {3});
  nn::CrossEntropyLoss ce(w, -100, "sum", 0.1);
  check_close(ce(x, t), cross_entropy(x, t, w, -100, "sum", 0.1));
  auto sd = ce.state_dict();
  CHECK(sd.size() == 1);
  CHECK(sd.count("weight") == 1);
  CHECK(nn::CrossEntropyLoss().state_dict().empty());  // torch's None buffer is absent
  nn::BCEWithLogitsLoss bl(Tensor(), "mean", w);
  CHECK(bl.state_dict().count("pos_weight") == 1);
  CHECK(bl(x, rand({4, 3})).sizes() == Shape{});
  check_error([&] { ce(x); }, "CrossEntropyLoss: forward takes input and target, got one tensor");
  check_error([&] { nn::MSELoss("avg"); }, "MSELoss: reduction must be 'mean', 'sum' or 'none', got 'avg'");
  check_close(nn::KLDivLoss("batchmean")(log_softmax(x, 1), softmax(x, 1)), zeros({}), 1e-6, 1e-6);
}
