// max_pool2d / avg_pool2d with torch's ceil_mode, count_include_pad and divisor_override: values against a
// float64 loop over torch's windows written here, a few values PyTorch 1.13 printed, gradcheck, torch's
// errors, the layers and script graphs (shapes unknown when lowering) equal to eager, shape propagation and
// compile(). tests/script/pool_modes.py compares the scripted functions with PyTorch.
#include <cmath>
#include <optional>

#include "eager/autograd/gradcheck.h"
#include "eager/nn/layers.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::seq;
using kiln::test::values;

namespace {

struct Win {
  int64_t k, s, p, d;
};

// torch's output length: floor or ceil of the span over the stride, plus one; a ceil_mode window must start
// inside the input or its left padding.
int64_t out_len(int64_t n, const Win& w, bool ceil_mode) {
  double span = double(n + 2 * w.p - w.d * (w.k - 1) - 1) / double(w.s);
  int64_t o = int64_t(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil_mode && (o - 1) * w.s >= n + w.p) --o;
  return o;
}

// max (avg when !max) over each window of an (N, C, H, W) float64 tensor, as torch defines them.
Tensor pool_ref(const Tensor& x, Win wh, Win ww, bool ceil_mode, bool max, bool count_include_pad = true,
                std::optional<int64_t> divisor = std::nullopt) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = out_len(H, wh, ceil_mode), OW = out_len(W, ww, ceil_mode);
  std::vector<double> v = values(x), out;
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double acc = max ? -INFINITY : 0.0;
        int64_t inside = 0, in_padded = 0;
        for (int64_t i = 0; i < wh.k; ++i)
          for (int64_t j = 0; j < ww.k; ++j) {
            int64_t h = oh * wh.s - wh.p + i * wh.d, w = ow * ww.s - ww.p + j * ww.d;
            if (h < H + wh.p && w < W + ww.p) ++in_padded;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            double e = v[size_t((p * H + h) * W + w)];
            acc = max ? std::max(acc, e) : acc + e;
            ++inside;
          }
        out.push_back(max ? acc : acc / double(divisor ? *divisor : count_include_pad ? in_padded : inside));
      }
  return tensor(out, {N, C, OH, OW}, DType::Float64);
}

}  // namespace

TEST_CASE("pool modes: ceil_mode, count_include_pad and divisor_override against torch's windows") {
  Tensor x = seq({2, 3, 7, 6}, 0.37, 0.2);
  const Win k2{2, 2, 0, 1}, k3{3, 2, 1, 1}, k3s3{3, 3, 1, 1}, k3d2{3, 2, 1, 2};
  check_close(max_pool2d(x, {2}, {2}, {0}, {1}, true), pool_ref(x, k2, k2, true, true), 0, 0);
  check_close(max_pool2d(x, {3}, {2}, {1}, {1}, true), pool_ref(x, k3, k3, true, true), 0, 0);
  check_close(max_pool2d(x, {3}, {2}, {1}, {2}, true), pool_ref(x, k3d2, k3d2, true, true), 0, 0);
  check_close(max_pool2d(x, {3, 2}, {3, 2}, {1, 0}, {1}, true), pool_ref(x, k3s3, k2, true, true), 0, 0);
  for (bool ceil : {false, true})
    for (bool cip : {false, true}) {
      CAPTURE(ceil);
      CAPTURE(cip);
      check_close(avg_pool2d(x, {3}, {2}, {1}, ceil, cip), pool_ref(x, k3, k3, ceil, false, cip), 1e-12, 1e-12);
      check_close(avg_pool2d(x, {3}, {3}, {1}, ceil, cip), pool_ref(x, k3s3, k3s3, ceil, false, cip), 1e-12, 1e-12);
      check_close(avg_pool2d(x, {3}, {2}, {1}, ceil, cip, 5), pool_ref(x, k3, k3, ceil, false, cip, 5), 1e-12, 1e-12);
    }
  // float32, unbatched
  Tensor xf = x.to(DType::Float32);
  check_close(max_pool2d(xf[0], {2}, {2}, {0}, {1}, true), pool_ref(x, k2, k2, true, true)[0].to(DType::Float32), 0, 0);
  check_close(avg_pool2d(xf[1], {3}, {2}, {1}, true, false), pool_ref(x, k3, k3, true, false, false)[1].to(DType::Float32));

  // PyTorch 1.13 on sin(0.37 * arange(30)) shaped (1, 1, 5, 6)
  Tensor t = seq({1, 1, 5, 6}, 0.37, 0.0);
  check_close(max_pool2d(t, {2}, {2}, {0}, {1}, true),
              tensor({0.7965654722360868, 0.8956986856800476, 0.99588084453764, 0.6793046521448148, 0.9964756147406005,
                      0.9593748338928642, 0.5182282059209767, -0.19398436125389723, -0.8047309092634671},
                     {1, 1, 3, 3}, DType::Float64),
              1e-12, 1e-12);
  check_close(avg_pool2d(t, {3}, {2}, {1}, true, false),
              tensor({0.42055631147208117, 0.40815799588529345, 0.22250952442762886, 0.08030421039974112,
                      0.06825070338301388, 0.05941188291799873, 0.023644583858360508, -0.00047499073083971205,
                      0.4348457135046525, 0.3364650253682145, 0.07383357402617453, -0.08625738029932944},
                     {1, 1, 3, 4}, DType::Float64),
              1e-12, 1e-12);
  check_close(avg_pool2d(t, {3}, {2}, {1}, true, true)[0][0][2][3].reshape({1}), tensor({-0.028752460099776483}, {1}, DType::Float64), 1e-12, 1e-12);
  check_close(avg_pool2d(t, {2}, {3}, {0}, true, true, 3),
              tensor({0.5607417486294416, 0.39148290858876367, 0.57979428467287, 0.20517206825190212}, {1, 1, 2, 2},
                     DType::Float64),
              1e-12, 1e-12);
  // torch's output lengths over H = 1..8 for (kernel, stride, padding) = (3, 2, 1) and (2, 3, 1), ceil_mode
  const int64_t k3_len[] = {1, 2, 2, 3, 3, 4, 4, 5}, k2s3_len[] = {1, 1, 2, 2, 2, 3, 3, 3};
  for (int64_t h = 1; h <= 8; ++h) {
    CAPTURE(h);
    CHECK(max_pool2d(zeros({1, 1, h, 9}), {3}, {2}, {1}, {1}, true).size(2) == k3_len[h - 1]);
    CHECK(avg_pool2d(zeros({1, 1, h, 9}), {2}, {3}, {1}, true).size(2) == k2s3_len[h - 1]);
  }
  CHECK(max_pool2d(zeros({1, 1, 2, 2}), {3}, {}, {0}, {1}, true).sizes() == Shape{1, 1, 1, 1});
}

TEST_CASE("pool modes: gradients, torch's errors, the layers, script and compile()") {
  Tensor x = seq({1, 2, 5, 6}, 0.91, 0.3).requires_grad_();
  CHECK(gradcheck([](const Tensors& in) { return max_pool2d(in[0], {2}, {2}, {0}, {1}, true); }, {x}));
  CHECK(gradcheck([](const Tensors& in) { return avg_pool2d(in[0], {3}, {2}, {1}, true, false); }, {x}));
  CHECK(gradcheck([](const Tensors& in) { return avg_pool2d(in[0], {3}, {2}, {1}, true, true, 4); }, {x}));

  check_error([] { avg_pool2d(randn({1, 1, 4, 4}), {2}, {}, {0}, false, true, 0); }, "avg_pool2d: divisor must be not zero");
  check_error([] { max_pool2d(randn({1, 1, 4, 4}), {3}, {}, {2}, {1}, true); },
              "max_pool2d: padding [2,2] must be at most half of kernel_size [3,3]");
  check_error([] { max_pool2d(randn({1, 1, 2, 2}), {3}, {}, {0}, {1}, false); }, "max_pool2d: output size is too small");

  Tensor xs = seq({2, 3, 7, 6}, 0.37, 0.2, DType::Float32);
  check_close(nn::MaxPool2d({3}, {2}, {0}, {1}, true)(xs), max_pool2d(xs, {3}, {2}, {0}, {1}, true), 0, 0);
  check_close(nn::AvgPool2d({3}, {2}, {1}, true, false, 7)(xs), avg_pool2d(xs, {3}, {2}, {1}, true, false, 7), 0, 0);

  // script: keyword and positional arguments, torch's defaults, a graph that knows no shape when lowering
  const char* src = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch import Tensor\n\n\n"
                    "def f(x: Tensor) -> Tensor:\n"
                    "    return F.max_pool2d(x, 3, 2, 1, 1, True) + F.avg_pool2d(x, 3, 2, 1, True, False)\n\n\n"
                    "def g(x: Tensor) -> Tensor:\n"
                    "    return F.avg_pool2d(x, kernel_size=2, ceil_mode=True, divisor_override=3)\n\n\n"
                    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.a = nn.MaxPool2d(2, ceil_mode=True)\n"
                    "        self.b = nn.AvgPool2d(3, 1, 1, count_include_pad=False)\n\n"
                    "    def forward(self, x):\n        return self.b(self.a(x))\n";
  ScriptFile m = script_source(src, "pools.py");
  for (Shape s : {Shape{2, 3, 7, 6}, Shape{3, 5, 5}}) {
    CAPTURE(shape_str(s));
    Tensor xa = seq(s, 0.53, 0.1, DType::Float32).requires_grad_(), xe = xa.detach().clone().requires_grad_();
    Tensor ys = m.function("f").call({xa})[0].to_tensor();
    Tensor ye = add(max_pool2d(xe, {3}, {2}, {1}, {1}, true), avg_pool2d(xe, {3}, {2}, {1}, true, false));
    check_close(ys, ye);
    sum(mul(ys, ys)).backward();
    sum(mul(ye, ye)).backward();
    check_close(xa.grad(), xe.grad());
    check_close(m.function("g").call({xe})[0].to_tensor(), avg_pool2d(xe, {2}, {}, {0}, true, true, 3));
    check_close(compile(m.function("f"))({xe})[0], ye);
  }
  auto net = m.module("Net");
  Tensor xn = seq({2, 3, 7, 5}, 0.41, 0.0, DType::Float32);
  Tensor want = avg_pool2d(max_pool2d(xn, {2}, {}, {0}, {1}, true), {3}, {1}, {1}, false, false);
  CHECK(want.sizes() == Shape{2, 3, 4, 3});
  check_close((*net)(xn), want);
  check_close(compile(net->method())({xn})[0], want);
  check_error([] { script_source("import torch.nn.functional as F\nfrom torch import Tensor\n\n\n"
                                 "def h(x: Tensor) -> Tensor:\n    return F.max_pool2d(x, 2, return_indices=True)\n", "ri.py")
                       .function("h")
                       .call({randn({1, 1, 4, 4})}); },
              "max_pool2d: return_indices=True is not supported");
}
