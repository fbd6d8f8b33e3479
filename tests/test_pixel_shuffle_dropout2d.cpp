// nn.PixelShuffle / PixelUnshuffle and nn.Dropout2d, composites over reshape / permute (and rand_like for the
// mask): index loops written here and values PyTorch 1.13 printed, the round trip, gradients, torch's errors,
// channel dropout's whole-map draws, and script graphs (no shape known when lowering) equal to eager,
// compiled. The registry's test scripts the three layers from their samples.
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

// out[n, c, h r + i, w r + j] = x[n, c r^2 + i r + j, h, w]
Tensor shuffle_ref(const Tensor& x, int64_t r) {
  const int64_t N = x.size(0), C = x.size(1) / (r * r), H = x.size(2), W = x.size(3);
  std::vector<double> v = values(x), y(v.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < H * r; ++oh)
        for (int64_t ow = 0; ow < W * r; ++ow)
          y[size_t(((n * C + c) * H * r + oh) * W * r + ow)] =
              v[size_t(((n * C * r * r + c * r * r + (oh % r) * r + ow % r) * H + oh / r) * W + ow / r)];
  return tensor(y, {N, C, H * r, W * r}, DType::Float64);
}

}  // namespace

TEST_CASE("pixel_shuffle and pixel_unshuffle: torch's layout, the round trip, gradients, errors") {
  Tensor x = arange(96.0).reshape({2, 8, 2, 3}).to(DType::Float64);
  Tensor y = pixel_shuffle(x, 2);
  check_close(y, shuffle_ref(x, 2), 0, 0);
  // PyTorch 1.13: F.pixel_shuffle(arange(96).reshape(2, 8, 2, 3), 2)[1, 1]
  check_close(y[1][1].reshape({-1}), tensor({72, 78, 73, 79, 74, 80, 84, 90, 85, 91, 86, 92, 75, 81, 76, 82, 77, 83, 87, 93,
                                             88, 94, 89, 95}, {24}, DType::Float64), 0, 0);
  check_close(pixel_unshuffle(y, 2), x, 0, 0);
  Tensor x5 = seq({2, 1, 18, 2, 2}, 0.3, 0.1);  // leading dims and r = 3
  check_close(pixel_shuffle(x5, 3).reshape({2, 2, 6, 6}), shuffle_ref(x5.reshape({2, 18, 2, 2}), 3), 0, 0);
  check_close(pixel_unshuffle(pixel_shuffle(x5, 3), 3), x5, 0, 0);
  check_close(nn::PixelShuffle(2)(x[0]), shuffle_ref(x, 2)[0], 0, 0);  // unbatched
  check_close(nn::PixelUnshuffle(2)(y), x, 0, 0);
  Tensor xg = seq({1, 4, 2, 3}, 0.7, 0.2).requires_grad_();
  CHECK(gradcheck([](const Tensors& in) { return pixel_shuffle(in[0], 2); }, {xg}));
  CHECK(gradcheck([](const Tensors& in) { return pixel_unshuffle(in[0], 2); }, {seq({1, 1, 4, 2}, 0.7, 0.2).requires_grad_()}));

  check_error([] { pixel_shuffle(randn({2, 5, 3, 3}), 2); },
              "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)=5 is not divisible by 4");
  check_error([] { pixel_shuffle(randn({5, 3}), 2); }, "pixel_shuffle expects input to have at least 3 dimensions, but got input with 2 dimension(s)");
  check_error([] { pixel_unshuffle(randn({1, 2, 5, 4}), 2); },
              "pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)=5 is not divisible by 2");
  check_error([] { pixel_unshuffle(randn({1, 2, 4, 5}), 2); },
              "pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)=5 is not divisible by 2");
}

TEST_CASE("dropout2d: whole feature maps kept or zeroed, eval is the identity, errors") {
  manual_seed(7);
  Tensor x = add(seq({8, 16, 3, 4}, 0.37, 0.2, DType::Float32), 2.0);  // no zeros in the input
  Tensor y = dropout2d(x, 0.25, true);
  std::vector<double> xv = values(x), yv = values(y);
  int64_t dropped = 0;
  for (int64_t m = 0; m < 8 * 16; ++m) {
    bool zero = yv[size_t(m * 12)] == 0.0;
    dropped += zero;
    for (int64_t k = 0; k < 12; ++k) {
      size_t i = size_t(m * 12 + k);
      if (zero) CHECK(yv[i] == 0.0);
      else CHECK(yv[i] == doctest::Approx(xv[i] / 0.75).epsilon(1e-6));
    }
  }
  CHECK(dropped > 10);  // of 128 maps, 32 expected: far from none and from all
  CHECK(dropped < 60);
  check_close(dropout2d(x, 0.25, false), x, 0, 0);
  check_close(dropout2d(x, 1.0, true), zeros_like(x), 0, 0);
  nn::Dropout2d m(0.5);
  m.eval();
  check_close(m(x), x, 0, 0);
  Tensor x2 = seq({5, 6}, 0.3, 0.1);  // (N, C): one draw per element, as torch's feature dropout
  CHECK(dropout2d(x2, 0.5, true).sizes() == Shape{5, 6});
  check_error([] { dropout2d(randn({2, 3, 4}), 1.5, true); }, "dropout2d: dropout probability has to be between 0 and 1, but got 1.5");
  check_error([] { nn::Dropout2d(-0.1); }, "Dropout2d: dropout probability has to be between 0 and 1");
}

TEST_CASE("pixel_shuffle and dropout2d in script: unknown shapes when lowering, equal to eager, compiled") {
  const char* src = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch import Tensor\n\n\n"
                    "class Up(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.conv = nn.Conv2d(3, 12, 3, padding=1)\n        self.up = nn.PixelShuffle(2)\n"
                    "        self.drop = nn.Dropout2d(0.3)\n\n"
                    "    def forward(self, x):\n        return self.drop(self.up(self.conv(x)))\n\n\n"
                    "def f(x: Tensor) -> Tensor:\n    return F.pixel_unshuffle(F.pixel_shuffle(x, 2) * 2.0, 2)\n";
  ScriptFile sm = script_source(src, "up.py");
  auto net = sm.module("Up");
  net->eval();
  std::map<std::string, Tensor> ps;
  for (const auto& [k, t] : net->named_parameters()) ps[k] = t;
  for (Shape s : {Shape{2, 3, 4, 5}, Shape{1, 3, 2, 2}}) {
    CAPTURE(shape_str(s));
    Tensor x = randn(s);
    Tensor want = pixel_shuffle(conv2d(x, ps.at("conv.weight"), ps.at("conv.bias"), {1}, {1}), 2);
    check_close((*net)(x), want);
    check_close(compile(net->method())({x})[0], want);
    Tensor x4 = randn({s[0], 8, s[2], s[3]});
    check_close(sm.function("f").call({x4})[0].to_tensor(), mul(x4, 2.0));
    check_close(compile(sm.function("f"))({x4})[0], mul(x4, 2.0));
  }
  net->train();
  Tensor y = (*net)(randn({2, 3, 4, 4}));
  std::vector<double> yv = values(y);
  for (int64_t m = 0; m < 2 * 3; ++m) {  // each (sample, channel) map all zero or none
    int64_t zeros = 0;
    for (int64_t k = 0; k < 64; ++k) zeros += yv[size_t(m * 64 + k)] == 0.0;
    CHECK((zeros == 0 || zeros == 64));
  }
  check_error([&] { sm.function("f").call({randn({2, 8, 3})}); }, "pixel_shuffle: a script graph takes a 4-D (N, C, H, W) input");
}
