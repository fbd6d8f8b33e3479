// nn.ConvTranspose2d / F.conv_transpose2d: values against a float64 scatter loop written here (each input
// element times the kernel, added at stride steps), gradcheck of input, weight and bias, torch's errors, the
// layer's state_dict names and shapes, a script graph with no shape known when lowering, and compile().
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

struct CT {
  Shape x, w;
  int64_t s, p, op, g, d;
};

Tensor conv_transpose_ref(const Tensor& x, const Tensor& w, const Tensor& bias, const CT& c) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Og = w.size(1), kh = w.size(2), kw = w.size(3), Cg = C / c.g, O = Og * c.g;
  const int64_t OH = (H - 1) * c.s - 2 * c.p + c.d * (kh - 1) + c.op + 1, OW = (W - 1) * c.s - 2 * c.p + c.d * (kw - 1) + c.op + 1;
  std::vector<double> xv = values(x), wv = values(w), y(size_t(N * O * OH * OW), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < C; ++ci)
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t iw = 0; iw < W; ++iw)
          for (int64_t o = 0; o < Og; ++o)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t oh = ih * c.s - c.p + i * c.d, ow = iw * c.s - c.p + j * c.d;
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                int64_t oc = (ci / Cg) * Og + o;
                y[size_t(((n * O + oc) * OH + oh) * OW + ow)] +=
                    xv[size_t(((n * C + ci) * H + ih) * W + iw)] * wv[size_t(((ci * Og + o) * kh + i) * kw + j)];
              }
  if (bias.defined()) {
    std::vector<double> bv = values(bias);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t oc = 0; oc < O; ++oc)
        for (int64_t k = 0; k < OH * OW; ++k) y[size_t((n * O + oc) * OH * OW + k)] += bv[size_t(oc)];
  }
  return tensor(y, {N, O, OH, OW}, DType::Float64);
}

const CT kCases[] = {
    {{2, 3, 4, 5}, {3, 2, 3, 3}, 1, 0, 0, 1, 1},   // stride 1: a full convolution
    {{2, 4, 3, 4}, {4, 3, 4, 4}, 2, 1, 0, 1, 1},   // DCGAN's upsampling block
    {{1, 4, 3, 3}, {4, 2, 3, 2}, 2, 1, 1, 2, 1},   // output_padding, groups, a non-square kernel
    {{2, 2, 3, 3}, {2, 3, 3, 3}, 3, 2, 2, 1, 2},   // dilation, output_padding 2 < stride 3
    {{1, 3, 3, 3}, {3, 8, 3, 3}, 2, 1, 1, 1, 1},   // 8 output channels: oneDNN's backward-data primitive in float32
    {{1, 2, 3, 4}, {2, 3, 2, 3}, 1, 0, 1, 1, 2},   // output_padding 1 = stride, < dilation 2 (torch allows it)
    {{1, 2, 3, 4}, {2, 3, 3, 3}, 1, 2, 1, 1, 2},   // the same with padding: the padded row holds values
    {{2, 2, 2, 3}, {2, 1, 3, 2}, 2, 1, 2, 2, 3},   // output_padding 2 past stride 2, < dilation 3, groups
};

Tensor run(const CT& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  return conv_transpose2d(x, w, b, {c.s}, {c.p}, {c.op}, c.g, {c.d});
}

}  // namespace

TEST_CASE("conv_transpose2d: values against a float64 loop, float32 on every path, gradcheck") {
  for (const CT& c : kCases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(shape_str(c.w));
    Tensor x = seq(c.x, 0.31, 0.2), w = seq(c.w, 0.77, 0.4), b = seq({c.w[1] * c.g}, 1.3, 0.5);
    Tensor want = conv_transpose_ref(x, w, b, c);
    check_close(run(c, x, w, b), want, 1e-12, 1e-12);
    check_close(run(c, x, w, Tensor()), conv_transpose_ref(x, w, Tensor(), c), 1e-12, 1e-12);
    check_close(run(c, x.to(DType::Float32), w.to(DType::Float32), b.to(DType::Float32)), want.to(DType::Float32), 1e-5, 1e-5);
    check_close(run(c, x[0], w, b), want[0], 1e-12, 1e-12);  // unbatched (C, H, W)
    Tensor xg = x.detach().requires_grad_(), wg = w.detach().requires_grad_(), bg = b.detach().requires_grad_();
    CHECK(gradcheck([&](const Tensors& in) { return run(c, in[0], in[1], in[2]); }, {xg, wg, bg}));
  }
  // float32 gradients on oneDNN's path equal float64's
  const CT& c = kCases[4];
  Tensor x = seq(c.x, 0.31, 0.2, DType::Float32).requires_grad_(), w = seq(c.w, 0.77, 0.4, DType::Float32).requires_grad_();
  Tensor x64 = x.detach().to(DType::Float64).requires_grad_(), w64 = w.detach().to(DType::Float64).requires_grad_();
  Tensor g = seq({1, 8, 6, 6}, 0.9, 0.1);
  sum(mul(run(c, x, w, Tensor()), g.to(DType::Float32))).backward();
  sum(mul(run(c, x64, w64, Tensor()), g)).backward();
  check_close(x.grad(), x64.grad().to(DType::Float32), 1e-5, 1e-5);
  check_close(w.grad(), w64.grad().to(DType::Float32), 1e-5, 1e-5);
}

TEST_CASE("conv_transpose2d: torch's errors, the layer's parameters, script and compile()") {
  Tensor x = randn({1, 4, 5, 5}), w = randn({4, 3, 3, 3});
  check_error([&] { conv_transpose2d(x, w, {}, {2}, {0}, {2}); },
              "conv_transpose2d: output padding must be smaller than either stride or dilation, but got output_padding_height: 2");
  check_error([&] { conv_transpose2d(randn({1, 5, 5, 5}), w); },
              "conv_transpose2d: Given transposed=1, weight of size [4,3,3,3], expected input[1,5,5,5] to have 4 channels, but got 5 channels instead");
  check_error([&] { conv_transpose2d(randn({1, 4, 1, 1}), w, {}, {1}, {3}); },
              "conv_transpose2d: Given input size per channel: (1 x 1). Calculated output size per channel: (-3 x -3). Output size is too small");
  check_error([&] { conv_transpose2d(randn({4, 5}), w); }, "Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d");
  check_error([&] { conv_transpose2d(x, w, randn({4})); },
              "conv_transpose2d: Given transposed=1, weight of size [4,3,3,3], expected bias to be 1-dimensional with 3 elements");
  check_error([&] { conv_transpose2d(x, w, {}, {0}); }, "conv_transpose2d: non-positive stride is not supported");
  check_error([] { nn::ConvTranspose2d(4, 3, {3}, {1}, {0}, {0}, 3); }, "ConvTranspose2d: in_channels must be divisible by groups");
  check_error([] { nn::ConvTranspose2d(4, 6, {3}, {1}, {0}, {0}, 4); }, "ConvTranspose2d: out_channels must be divisible by groups");

  // torch's names and shapes (a torch checkpoint loads)
  nn::ConvTranspose2d m(4, 6, {3}, {2}, {1}, {1}, 2);
  auto sd = m.state_dict();
  REQUIRE(sd.size() == 2);
  CHECK(sd.at("weight").sizes() == Shape{4, 3, 3, 3});
  CHECK(sd.at("bias").sizes() == Shape{6});
  Tensor xs = randn({2, 4, 3, 4});
  check_close(m(xs), conv_transpose2d(xs, m.weight, m.bias, {2}, {1}, {1}, 2));
  CHECK(m(xs).sizes() == Shape{2, 6, 6, 8});

  // a DCGAN generator's block in a model file: no shape known when lowering, any batch, compiled
  const char* src = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch import Tensor\n\n\n"
                    "class Gen(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.up = nn.ConvTranspose2d(4, 3, 4, 2, 1, bias=False)\n\n"
                    "    def forward(self, x):\n        return torch.tanh(self.up(x))\n\n\n"
                    "def f(x: Tensor, w: Tensor, b: Tensor) -> Tensor:\n"
                    "    return F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1) * 2.0\n";
  ScriptFile sm = script_source(src, "gen.py");
  auto gen = sm.module("Gen");
  std::map<std::string, Tensor> params;
  for (const auto& [k, t] : gen->named_parameters()) params[k] = t;
  REQUIRE(params.count("up.weight"));
  CHECK(params.at("up.weight").sizes() == Shape{4, 3, 4, 4});
  for (int64_t n : {1, 3}) {
    Tensor xin = randn({n, 4, 3, 5});
    Tensor want = tanh(conv_transpose2d(xin, params.at("up.weight"), {}, {2}, {1}));
    check_close((*gen)(xin), want);
    check_close(compile(gen->method())({xin})[0], want);
  }
  Tensor wf = randn({4, 3, 3, 3}).requires_grad_(), bf = randn({3}).requires_grad_(), xf = randn({2, 4, 3, 3}).requires_grad_();
  Tensor ys = sm.function("f").call({xf, wf, bf})[0].to_tensor();
  Tensor ye = mul(conv_transpose2d(xf, wf, bf, {2}, {1}, {1}), 2.0);
  CHECK(ys.sizes() == Shape{2, 3, 6, 6});
  check_close(ys, ye);
  check_close(compile(sm.function("f"))({xf, wf, bf})[0], ye);
  Tensor gs = randn(ys.sizes());
  Tensors a = grad({sum(mul(ys, gs))}, {xf, wf, bf}), e = grad({sum(mul(ye, gs))}, {xf, wf, bf});
  for (size_t i = 0; i < 3; ++i) check_close(a[i], e[i]);
}
