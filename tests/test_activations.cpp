// The activations and adaptive pools of torch.nn.functional that eager writes as composites
// (eager/composites.h): values against float64 references written here independently, finite-difference
// gradients (with inputs out to |x| = 50, where a careless formula's exp overflows into a NaN gradient),
// torch's gradients at the kinks, and torch's argument errors. The scripted and registered forms are
// compared with eager by tests/test_layer_registry.cpp and with PyTorch by tests/script/*.py.
#include <cmath>

#include "eager/autograd/gradcheck.h"
#include "eager/nn/layers.h"
#include "eager/nn/registry.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::values;

namespace {

using Ref = std::function<double(double)>;

struct Act {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  Ref ref;
};

double softplus_ref(double x, double beta, double threshold) {
  return beta * x > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}
double clamp_ref(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

const double kSeluAlpha = 1.6732632423543772848170429916717, kSeluScale = 1.0507009873554804934193349852946;

std::vector<Act> activations() {
  return {
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }, [](double x) { return x > 0 ? x : 0.2 * x; }},
      {"elu", [](const Tensor& x) { return elu(x, 0.7); }, [](double x) { return x > 0 ? x : 0.7 * std::expm1(x); }},
      {"selu", [](const Tensor& x) { return selu(x); },
       [](double x) { return kSeluScale * (x > 0 ? x : kSeluAlpha * std::expm1(x)); }},
      {"celu", [](const Tensor& x) { return celu(x, 2.0); }, [](double x) { return x > 0 ? x : 2.0 * std::expm1(x / 2.0); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }, [](double x) { return softplus_ref(x, 1.0, 20.0); }},
      {"softplus(beta=2, threshold=10)", [](const Tensor& x) { return softplus(x, 2.0, 10.0); },
       [](double x) { return softplus_ref(x, 2.0, 10.0); }},
      {"softplus(beta=-0.5)", [](const Tensor& x) { return softplus(x, -0.5, 20.0); },
       [](double x) { return softplus_ref(x, -0.5, 20.0); }},
      {"mish", [](const Tensor& x) { return mish(x); }, [](double x) { return x * std::tanh(softplus_ref(x, 1.0, 1e300)); }},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x / (1.0 + std::exp(-x)); }},
      {"logsigmoid", [](const Tensor& x) { return logsigmoid(x); }, [](double x) { return -softplus_ref(-x, 1.0, 1e300); }},
      {"softsign", [](const Tensor& x) { return softsign(x); }, [](double x) { return x / (1.0 + std::fabs(x)); }},
      {"hardtanh", [](const Tensor& x) { return hardtanh(x, -2.0, 2.5); }, [](double x) { return clamp_ref(x, -2.0, 2.5); }},
      {"relu6", [](const Tensor& x) { return relu6(x); }, [](double x) { return clamp_ref(x, 0.0, 6.0); }},
      {"hardsigmoid", [](const Tensor& x) { return hardsigmoid(x); }, [](double x) { return clamp_ref(x + 3.0, 0.0, 6.0) / 6.0; }},
      {"hardswish", [](const Tensor& x) { return hardswish(x); }, [](double x) { return x * clamp_ref(x + 3.0, 0.0, 6.0) / 6.0; }},
  };
}

// Away from every kink above (0, +-1, -2, 2.5, +-3, 6, the thresholds 5 and 20), out to |x| = 50.
const std::vector<double> kSmooth = {-50, -31.5, -12.25, -4.5, -2.6, -1.7, -0.85, -0.4, -0.05,
                                     0.07, 0.45, 1.3, 2.2, 2.8, 4.1, 5.5, 9.5, 19.5, 23.0, 50.0};

}  // namespace

TEST_CASE("activations: values against float64 references, out to |x| = 100 in float32 and float64") {
  std::vector<double> xs = kSmooth;
  for (double v : {-100.0, -88.0, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0, 20.0, 88.0, 100.0}) xs.push_back(v);
  for (const Act& a : activations()) {
    CAPTURE(a.name);
    std::vector<double> want;
    for (double v : xs) want.push_back(a.ref(v));
    Tensor ref = tensor(want, {int64_t(xs.size())}, DType::Float64);
    check_close(a.fn(tensor(xs, {int64_t(xs.size())}, DType::Float64)), ref, 1e-12, 1e-12);
    check_close(a.fn(tensor(xs, {int64_t(xs.size())}, DType::Float32)), ref.to(DType::Float32), 1e-5, 1e-6);
  }
}

TEST_CASE("activations: finite-difference gradients, out to |x| = 50") {
  for (const Act& a : activations()) {
    CAPTURE(a.name);
    Tensor x = tensor(kSmooth, {4, 5}, DType::Float64).requires_grad_();
    CHECK_NOTHROW(gradcheck([&](const Tensors& in) { return a.fn(in[0]); }, {x}));
  }
}

TEST_CASE("activations: float32 gradients stay finite where exp(|x|) overflows") {
  for (const Act& a : activations()) {
    CAPTURE(a.name);
    Tensor x = tensor({-1000.0, -100.0, -90.0, 0.0, 90.0, 100.0, 1000.0}, {7}, DType::Float32).requires_grad_();
    Tensor y = a.fn(x);
    sum(y).backward();
    for (double g : values(x.grad())) CHECK(std::isfinite(g));
    for (double v : values(y)) CHECK(std::isfinite(v));
  }
  // NaN passes through every one of them, as in torch
  for (const Act& a : activations()) {
    CAPTURE(a.name);
    CHECK(std::isnan(values(a.fn(tensor({NAN}, {1})))[0]));
  }
}

TEST_CASE("activations: the gradient at the kinks is torch's") {
  // torch 1.13 at x = [0, 3, -3, 1, -1, 6]
  Tensor at = tensor({0.0, 3.0, -3.0, 1.0, -1.0, 6.0}, {6}, DType::Float64);
  auto grad = [&](const std::function<Tensor(const Tensor&)>& f) {
    Tensor x = at.clone().requires_grad_();
    sum(f(x)).backward();
    return x.grad();
  };
  check_close(grad([](const Tensor& x) { return elu(x); }), tensor({1.0, 1.0, std::exp(-3.0), 1.0, std::exp(-1.0), 1.0}, {6}, DType::Float64));
  check_close(grad([](const Tensor& x) { return elu(x, 0.5); }).narrow(0, 0, 1), tensor({1.0}, {1}, DType::Float64));
  check_close(grad([](const Tensor& x) { return leaky_relu(x); }), tensor({0.01, 1, 0.01, 1, 0.01, 1}, {6}, DType::Float64));
  check_close(grad([](const Tensor& x) { return hardtanh(x); }), tensor({1.0, 0, 0, 0, 0, 0}, {6}, DType::Float64));
  check_close(grad([](const Tensor& x) { return relu6(x); }), tensor({0.0, 1, 0, 1, 0, 0}, {6}, DType::Float64));
  check_close(grad([](const Tensor& x) { return hardsigmoid(x); }), tensor({1.0 / 6, 0, 0, 1.0 / 6, 1.0 / 6, 0}, {6}, DType::Float64));
  check_close(grad([](const Tensor& x) { return softplus(x); }).narrow(0, 0, 1), tensor({0.5}, {1}, DType::Float64));
  check_close(grad([](const Tensor& x) { return logsigmoid(x); }).narrow(0, 0, 1), tensor({0.5}, {1}, DType::Float64));
  check_close(grad([](const Tensor& x) { return hardswish(x); }).narrow(0, 0, 1), tensor({0.5}, {1}, DType::Float64));
  check_close(grad([](const Tensor& x) { return softsign(x); }).narrow(0, 0, 1), tensor({1.0}, {1}, DType::Float64));
}

TEST_CASE("activations: torch's argument errors, in eager, the registry and script") {
  Tensor x = randn({3});
  check_error([&] { hardtanh(x, 1.0, 1.0); }, "hardtanh: max_val must be larger than min_val, got min_val=1 and max_val=1");
  check_error([&] { nn::Hardtanh(2.0, -2.0); }, "Hardtanh: max_val must be larger than min_val");
  check_error([&] { celu(x, 0.0); }, "celu: alpha cannot be 0 for CELU");
  const nn::LayerSpec* ht = nn::find_layer("Hardtanh");
  REQUIRE(ht);
  check_error([&] { ht->make(nn::bind_layer_args(*ht, {IValue(1.0), IValue(0.5)}, {})); },
              "nn.Hardtanh: max_val must be larger than min_val, got min_val=1 and max_val=0.5");
  // the deprecated min_value / max_value win when given, as in torch
  auto m = ht->make(nn::bind_layer_args(*ht, {}, {{"min_value", IValue(-0.5)}, {"max_value", IValue(0.25)}}));
  check_close((*m)(tensor({-3.0, 0.1, 3.0}, {3})), tensor({-0.5, 0.1, 0.25}, {3}));
  const nn::LayerSpec* ce = nn::find_layer("CELU");
  REQUIRE(ce);
  check_error([&] { ce->make(nn::bind_layer_args(*ce, {IValue(0.0)}, {})); }, "nn.CELU: alpha cannot be 0 for CELU");
  const char* src = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.act = nn.Hardtanh(1.0, -1.0)\n\n    def forward(self, x):\n        return self.act(x)\n";
  check_error([&] { script_source(src, "ht.py").module("Net"); }, "ht.py:7:23: error: nn.Hardtanh: max_val must be larger than min_val");
  const char* fn = "import torch.nn.functional as F\nfrom torch import Tensor\n\n\ndef f(x: Tensor) -> Tensor:\n"
                   "    return F.celu(x, alpha=0.0)\n";
  check_error([&] { script::check_source(fn, "celu.py"); }, "celu.py:6:");
}

TEST_CASE("activations: the modules are the functions, inplace=True accepted and the input left as it was") {
  Tensor x = mul(randn({4, 5}), 20.0);
  Tensor keep = x.clone();
  const nn::LayerSpec* lr = nn::find_layer("LeakyReLU");
  REQUIRE(lr);
  auto m = lr->make(nn::bind_layer_args(*lr, {IValue(0.3), IValue(true)}, {}));
  check_close((*m)(x), leaky_relu(x, 0.3));
  check_close(x, keep, 0, 0);
  check_close(nn::ELU(0.5)(x), elu(x, 0.5));
  check_close(nn::SELU()(x), selu(x));
  check_close(nn::CELU(1.5)(x), celu(x, 1.5));
  check_close(nn::Softplus(2.0, 3.0)(x), softplus(x, 2.0, 3.0));
  check_close(nn::Mish()(x), mish(x));
  check_close(nn::SiLU()(x), silu(x));
  check_close(nn::LogSigmoid()(x), logsigmoid(x));
  check_close(nn::Softsign()(x), softsign(x));
  check_close(nn::Hardtanh(-3.0, 4.0)(x), hardtanh(x, -3.0, 4.0));
  check_close(nn::ReLU6()(x), relu6(x));
  check_close(nn::Hardsigmoid()(x), hardsigmoid(x));
  check_close(nn::Hardswish()(x), hardswish(x));
}

namespace {

// torch's bins, by loops over a float64 copy: avg or max per (row bin, column bin).
Tensor adaptive_ref(const Tensor& x_in, int64_t oh, int64_t ow, bool max) {
  Tensor x = x_in.dim() == 3 ? unsqueeze(x_in, 0) : x_in;
  int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  std::vector<double> v = values(x), out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t h0 = int64_t(std::floor(double(i * H) / double(oh))), h1 = int64_t(std::ceil(double((i + 1) * H) / double(oh)));
          int64_t w0 = int64_t(std::floor(double(j * W) / double(ow))), w1 = int64_t(std::ceil(double((j + 1) * W) / double(ow)));
          double acc = max ? -INFINITY : 0.0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {
              double e = v[size_t(((n * C + c) * H + h) * W + w)];
              acc = max ? std::max(acc, e) : acc + e;
            }
          out.push_back(max ? acc : acc / double((h1 - h0) * (w1 - w0)));
        }
  Tensor r = tensor(out, {N, C, oh, ow}, DType::Float64);
  return x_in.dim() == 3 ? squeeze(r, 0) : r;
}

}  // namespace

TEST_CASE("adaptive pools: torch's bins for any output size, batched or not, None keeping a dim") {
  using Sizes = std::vector<std::optional<int64_t>>;
  struct C {
    Shape in;
    Sizes out;
    int64_t oh, ow;
  };
  const C cases[] = {
      {{2, 3, 7, 5}, {3, 2}, 3, 2},          // bins that overlap
      {{2, 3, 8, 6}, {4, 3}, 4, 3},          // divisible: the pool rows
      {{2, 3, 7, 5}, {1}, 1, 1},             // global
      {{2, 3, 7, 5}, {std::nullopt, 3}, 7, 3},
      {{2, 3, 7, 5}, {1, std::nullopt}, 1, 5},
      {{2, 3, 7, 5}, {std::nullopt}, 7, 5},
      {{3, 7, 5}, {4, 4}, 4, 4},             // unbatched (C, H, W), more outputs than columns
      {{3, 6, 4}, {2}, 2, 2},                // unbatched, divisible
      {{1, 2, 5, 5}, {5, 5}, 5, 5},          // the identity
  };
  for (const C& c : cases) {
    CAPTURE(shape_str(c.in));
    CAPTURE(c.oh);
    CAPTURE(c.ow);
    Tensor x = randn(c.in, DType::Float64);
    check_close(adaptive_avg_pool2d(x, c.out), adaptive_ref(x, c.oh, c.ow, false), 1e-12, 1e-12);
    check_close(adaptive_max_pool2d(x, c.out), adaptive_ref(x, c.oh, c.ow, true), 0, 0);
    check_close(nn::AdaptiveAvgPool2d(c.out)(x), adaptive_ref(x, c.oh, c.ow, false), 1e-12, 1e-12);
    check_close(nn::AdaptiveMaxPool2d(c.out)(x), adaptive_ref(x, c.oh, c.ow, true), 0, 0);
    Tensor xf = x.to(DType::Float32);
    check_close(adaptive_avg_pool2d(xf, c.out), adaptive_ref(x, c.oh, c.ow, false).to(DType::Float32), 1e-5, 1e-6);
    Tensor xg = x.detach().requires_grad_();
    CHECK_NOTHROW(gradcheck([&](const Tensors& in) { return adaptive_avg_pool2d(in[0], c.out); }, {xg}));
    CHECK_NOTHROW(gradcheck([&](const Tensors& in) { return adaptive_max_pool2d(in[0], c.out); }, {xg}));
  }
  CHECK(adaptive_avg_pool2d(randn({2, 3, 4, 4}), {0, 2}).sizes() == Shape{2, 3, 0, 2});
}

TEST_CASE("adaptive pools: torch's errors, and what a script graph lowers without the input's shape") {
  check_error([] { adaptive_avg_pool2d(randn({3, 4}), {2}); }, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [3,4]");
  check_error([] { adaptive_max_pool2d(randn({1, 2, 3, 4, 5}), {2}); }, "adaptive_max_pool2d(): Expected 3D or 4D tensor");
  check_error([] { adaptive_avg_pool2d(randn({1, 3, 4, 4}), {2, 2, 2}); }, "adaptive_avg_pool2d: output_size must be 2");
  check_error([] { adaptive_avg_pool2d(randn({1, 3, 4, 4}), {-1}); },
              "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {-1, -1}");
  check_error([] { adaptive_avg_pool2d(randn({1, 3, 0, 4}), {2}); },
              "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, but input has sizes "
              "[1,3,0,4] with dimension 2 being empty");
  const nn::LayerSpec* mp = nn::find_layer("AdaptiveMaxPool2d");
  REQUIRE(mp);
  check_error([&] { mp->make(nn::bind_layer_args(*mp, {IValue(2), IValue(true)}, {})); }, "nn.AdaptiveMaxPool2d: return_indices=True is not supported");
  check_error([&] { mp->make(nn::bind_layer_args(*mp, {IValue("a")}, {})); }, "nn.AdaptiveMaxPool2d: output_size must be an int, None or a tuple of them, got str");
  auto pool = mp->make(nn::bind_layer_args(*mp, {IValue::tuple({IValue(3), IValue()})}, {}));
  Tensor x = randn({2, 3, 7, 5});
  check_close((*pool)(x), adaptive_max_pool2d(x, {3, std::nullopt}), 0, 0);

  // A script graph knows neither the rank nor the shape when lowering: sizes of 1 and None reduce over
  // negative dims, the others cut their bins with bounds computed when the graph runs, and the rank is
  // checked then.
  const char* src = "import torch.nn.functional as F\nfrom torch import Tensor\n\n\n"
                    "def g(x: Tensor) -> Tensor:\n    return F.adaptive_avg_pool2d(x, 1) + F.adaptive_max_pool2d(x, (1, 1))\n\n\n"
                    "def rows(x: Tensor) -> Tensor:\n    return F.adaptive_avg_pool2d(x, (None, 1))\n";
  ScriptFile m = script_source(src, "pool.py");
  Tensor x3 = randn({3, 5, 6});
  check_close(m.function("g").call({x})[0].to_tensor(), add(adaptive_avg_pool2d(x, {1}), adaptive_max_pool2d(x, {1})));
  check_close(m.function("g").call({x3})[0].to_tensor(), add(adaptive_avg_pool2d(x3, {1}), adaptive_max_pool2d(x3, {1})));
  check_close(m.function("rows").call({x})[0].to_tensor(), adaptive_avg_pool2d(x, {std::nullopt, 1}));
  check_error([&] { m.function("g").call({randn({3, 4})}); }, "adaptive_avg_pool2d(): Expected 3D or 4D tensor");
  const char* general = "import torch.nn.functional as F\nfrom torch import Tensor\n\n\n"
                        "def f(x: Tensor) -> Tensor:\n    return F.adaptive_avg_pool2d(x, (2, 3))\n\n\n"
                        "def h(x: Tensor) -> Tensor:\n    return F.adaptive_max_pool2d(x, (3, None)) * 2.0\n";
  ScriptFile g = script_source(general, "general.py");
  for (Shape s : {Shape{2, 3, 7, 5}, Shape{3, 4, 6}, Shape{1, 1, 2, 3}}) {
    CAPTURE(shape_str(s));
    for (bool max : {false, true}) {
      Tensor xs = randn(s).requires_grad_();
      Tensor xe = xs.detach().clone().requires_grad_();
      Tensor ys = g.function(max ? "h" : "f").call({xs})[0].to_tensor();
      Tensor ye = max ? mul(adaptive_max_pool2d(xe, {3, std::nullopt}), 2.0) : adaptive_avg_pool2d(xe, {2, 3});
      check_close(ys, ye);
      sum(ys).backward();
      sum(ye).backward();
      check_close(xs.grad(), xe.grad());
    }
  }
}
