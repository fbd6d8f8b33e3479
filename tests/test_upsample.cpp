// F.interpolate / nn.Upsample / nn.UpsamplingNearest2d, composites over index_select (indices and weights as
// constants when the shape is known) and over expand / cat (an integer scale_factor, which reads no size): a
// float64 loop of torch 1.13's source-index rules, values PyTorch printed, gradients, torch's errors, and
// script graphs (no shape known when lowering) equal to eager, compiled. The registry's test scripts the
// layers from their samples.
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

// torch's upsample_nearest2d / upsample_bilinear2d kernels, point by point in float64; `scale` is the
// scale_factor torch's kernel receives (none when size was given or recompute_scale_factor is true)
Tensor upsample_ref(const Tensor& x, int64_t OH, int64_t OW, bool bilinear, bool align, std::optional<double> sh,
                    std::optional<double> sw) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  std::vector<double> v = values(x), y;
  auto ratio = [&](int64_t in, int64_t out, std::optional<double> s) {
    if (align) return out > 1 ? double(in - 1) / double(out - 1) : 0.0;
    return s ? 1.0 / *s : double(in) / double(out);
  };
  const double rh = ratio(H, OH, sh), rw = ratio(W, OW, sw);
  auto at = [&](int64_t nc, int64_t h, int64_t w) { return v[size_t((nc * H + h) * W + w)]; };
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        if (!bilinear) {
          int64_t h = std::min(int64_t(std::floor(double(oh) * rh)), H - 1), w = std::min(int64_t(std::floor(double(ow) * rw)), W - 1);
          y.push_back(at(nc, h, w));
          continue;
        }
        double fh = align ? oh * rh : std::max(0.0, (oh + 0.5) * rh - 0.5);
        double fw = align ? ow * rw : std::max(0.0, (ow + 0.5) * rw - 0.5);
        int64_t h0 = int64_t(fh), w0 = int64_t(fw);
        int64_t h1 = h0 + (h0 < H - 1), w1 = w0 + (w0 < W - 1);
        double lh = fh - double(h0), lw = fw - double(w0);
        y.push_back((1 - lh) * ((1 - lw) * at(nc, h0, w0) + lw * at(nc, h0, w1)) + lh * ((1 - lw) * at(nc, h1, w0) + lw * at(nc, h1, w1)));
      }
  return tensor(y, {N, C, OH, OW}, DType::Float64);
}

using Scales = std::optional<std::vector<double>>;

}  // namespace

TEST_CASE("interpolate: nearest and bilinear against torch's index rules, size and scale_factor") {
  Tensor x = seq({2, 3, 5, 4}, 0.37, 0.2, DType::Float64);
  for (bool bilinear : {false, true})
    for (bool align : {false, true}) {
      if (!bilinear && align) continue;
      CAPTURE(bilinear);
      CAPTURE(align);
      std::optional<bool> ac = bilinear ? std::optional<bool>(align) : std::nullopt;
      const std::string mode = bilinear ? "bilinear" : "nearest";
      for (Shape size : {Shape{7, 9}, Shape{3, 2}, Shape{5, 4}, Shape{1, 1}, Shape{10, 3}}) {
        CAPTURE(shape_str(size));
        check_close(interpolate(x, size, std::nullopt, mode, ac), upsample_ref(x, size[0], size[1], bilinear, align, {}, {}), 1e-12, 1e-12);
      }
      check_close(interpolate(x, Shape{6}, std::nullopt, mode, ac), upsample_ref(x, 6, 6, bilinear, align, {}, {}), 1e-12, 1e-12);
      for (std::vector<double> s : {std::vector<double>{2.0}, {3.0, 2.0}, {1.7, 1.3}, {0.5, 0.75}, {2.5, 1.0}}) {
        CAPTURE(s[0]);
        double a = s[0], b = s.size() > 1 ? s[1] : s[0];
        int64_t oh = int64_t(std::floor(5 * a)), ow = int64_t(std::floor(4 * b));
        check_close(interpolate(x, std::nullopt, s, mode, ac), upsample_ref(x, oh, ow, bilinear, align, a, b), 1e-12, 1e-12);
        check_close(interpolate(x, std::nullopt, s, mode, ac, true), upsample_ref(x, oh, ow, bilinear, align, {}, {}), 1e-12, 1e-12);
      }
    }
  // PyTorch 1.13 printed these (float64)
  Tensor r = arange(5.0).to(DType::Float64).reshape({1, 1, 1, 5});
  check_close(interpolate(r, std::nullopt, std::vector<double>{1, 1.7}).reshape({-1}), tensor({0, 0, 1, 1, 2, 2, 3, 4}, {8}, DType::Float64), 0, 0);
  check_close(interpolate(r, std::nullopt, std::vector<double>{1, 1.7}, "nearest", std::nullopt, true).reshape({-1}),
              tensor({0, 0, 1, 1, 2, 3, 3, 4}, {8}, DType::Float64), 0, 0);
  Tensor q = tensor({1, 4, 2, 0, 3, 5}, {1, 1, 2, 3}, DType::Float64);
  check_close(interpolate(q, Shape{3, 5}, std::nullopt, "bilinear").reshape({-1}),
              tensor({1.0, 2.2, 4.0, 2.8, 2.0, 0.5, 1.7, 3.5, 3.5, 3.5, 0.0, 1.2, 3.0, 4.2, 5.0}, {15}, DType::Float64), 1e-12, 1e-12);
  check_close(interpolate(q, Shape{3, 5}, std::nullopt, "bilinear", true).reshape({-1}),
              tensor({1.0, 2.5, 4.0, 3.0, 2.0, 0.5, 2.0, 3.5, 3.5, 3.5, 0.0, 1.5, 3.0, 4.0, 5.0}, {15}, DType::Float64), 1e-12, 1e-12);
  check_close(interpolate(q, std::nullopt, std::vector<double>{2}, "bilinear").reshape({-1}),
              tensor({1.0, 1.75, 3.25, 3.5, 2.5, 2.0, 0.75, 1.5, 3.0, 3.5, 3.0, 2.75, 0.25, 1.0, 2.5, 3.5, 4.0, 4.25, 0.0, 0.75, 2.25, 3.5, 4.5, 5.0},
                     {24}, DType::Float64), 1e-12, 1e-12);
  check_close(interpolate(q, std::nullopt, std::vector<double>{0.5}, "bilinear").reshape({-1}), tensor({2.0}, {1}, DType::Float64), 1e-12, 1e-12);
  // float32 in, float32 out
  CHECK(interpolate(seq({1, 2, 3, 3}, 0.3, 0.1, DType::Float32), Shape{4, 5}, std::nullopt, "bilinear").dtype() == DType::Float32);
}

TEST_CASE("interpolate: gradients, nn.Upsample and nn.UpsamplingNearest2d") {
  for (const char* mode : {"nearest", "bilinear"}) {
    CAPTURE(mode);
    bool bil = std::string(mode) == "bilinear";
    std::optional<bool> ac = bil ? std::optional<bool>(true) : std::nullopt;
    CHECK(gradcheck([&](const Tensors& in) { return interpolate(in[0], Shape{5, 3}, std::nullopt, mode); },
                    {seq({1, 2, 3, 4}, 0.7, 0.2).requires_grad_()}));
    CHECK(gradcheck([&](const Tensors& in) { return interpolate(in[0], Shape{4, 7}, std::nullopt, mode, ac); },
                    {seq({2, 1, 3, 2}, 0.7, 0.2).requires_grad_()}));
    CHECK(gradcheck([&](const Tensors& in) { return interpolate(in[0], std::nullopt, std::vector<double>{2, 3}, mode); },
                    {seq({1, 2, 3, 2}, 0.7, 0.2).requires_grad_()}));
  }
  Tensor x = seq({2, 3, 3, 4}, 0.37, 0.2, DType::Float64);
  check_close(nn::Upsample(std::nullopt, std::vector<double>{2}, "bilinear")(x), upsample_ref(x, 6, 8, true, false, 2, 2), 1e-12, 1e-12);
  check_close(nn::Upsample(Shape{5, 7}, std::nullopt, "bilinear", true)(x), upsample_ref(x, 5, 7, true, true, {}, {}), 1e-12, 1e-12);
  check_close(nn::UpsamplingNearest2d(std::nullopt, std::vector<double>{3})(x), upsample_ref(x, 9, 12, false, false, 3, 3), 0, 0);
  check_close(nn::UpsamplingNearest2d(Shape{4}, std::nullopt)(x), upsample_ref(x, 4, 4, false, false, {}, {}), 0, 0);
}

TEST_CASE("interpolate: torch's errors") {
  Tensor x = randn({1, 1, 2, 2});
  check_error([&] { interpolate(x, std::nullopt, std::nullopt); }, "interpolate: either size or scale_factor should be defined");
  check_error([&] { interpolate(x, Shape{3}, std::vector<double>{2}); }, "interpolate: only one of size or scale_factor should be defined");
  check_error([&] { interpolate(x, Shape{3}, std::nullopt, "nearest", true); },
              "interpolate: align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear");
  for (const char* m : {"bicubic", "area", "nearest-exact", "linear", "trilinear"})
    check_error([&] { interpolate(x, Shape{3}, std::nullopt, m); }, fmt::format("interpolate: mode '{}' is not supported", m));
  check_error([&] { interpolate(x, Shape{3}, std::nullopt, "foo"); }, "nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got foo)");
  check_error([&] { interpolate(x, Shape{3, 3, 3}, std::nullopt); }, "interpolate: input and output must have the same number of spatial dimensions");
  check_error([&] { interpolate(x, std::nullopt, std::vector<double>{2, 2, 2}); },
              "interpolate: input and scale_factor must have the same number of spatial dimensions");
  check_error([&] { interpolate(x, Shape{3}, std::nullopt, "nearest", std::nullopt, true); },
              "interpolate: recompute_scale_factor is not meaningful with an explicit size");
  check_error([&] { interpolate(x, std::nullopt, std::vector<double>{0.2}); },
              "interpolate: input and output sizes should be greater than 0, but got input (H: 2, W: 2) output (H: 0, W: 0)");
  check_error([&] { interpolate(randn({1, 2, 3}), Shape{3}, std::nullopt, "bilinear"); },
              "interpolate: bilinear mode needs a 4-D (N, C, H, W) input, got 3-D input of shape [1,2,3]");
  check_error([&] { interpolate(x, Shape{3}, std::nullopt, "bilinear", std::nullopt, std::nullopt, true); },
              "interpolate: antialias=True is not supported");
}

TEST_CASE("interpolate in script: integer scale_factor with unknown shapes, equal to eager, compiled") {
  const char* src = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch import Tensor\n\n\n"
                    "class Up(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.conv = nn.Conv2d(3, 4, 3, padding=1)\n        self.up = nn.Upsample(scale_factor=2, mode='bilinear')\n"
                    "        self.near = nn.UpsamplingNearest2d(scale_factor=(2, 3))\n\n"
                    "    def forward(self, x):\n        return self.near(self.up(self.conv(x)))\n\n\n"
                    "def f(x: Tensor) -> Tensor:\n    return F.interpolate(x, scale_factor=(3, 2), mode='bilinear', align_corners=False)\n";
  ScriptFile sm = script_source(src, "up.py");
  auto net = sm.module("Up");
  std::map<std::string, Tensor> ps;
  for (const auto& [k, t] : net->named_parameters()) ps[k] = t;
  for (Shape s : {Shape{2, 3, 4, 5}, Shape{1, 3, 1, 2}}) {
    CAPTURE(shape_str(s));
    Tensor x = randn(s);
    Tensor c = conv2d(x, ps.at("conv.weight"), ps.at("conv.bias"), {1}, {1});
    Tensor want = interpolate(interpolate(c, std::nullopt, std::vector<double>{2}, "bilinear"), std::nullopt, std::vector<double>{2, 3});
    check_close((*net)(x), want);
    check_close(compile(net->method())({x})[0], want);
    Tensor wf = interpolate(x, std::nullopt, std::vector<double>{3, 2}, "bilinear", false);
    check_close(sm.function("f").call({x})[0].to_tensor(), wf);
    check_close(compile(sm.function("f"))({x})[0], wf);
    // the index rule, written independently, for the shape-free form too
    check_close(sm.function("f").call({x.to(DType::Float64)})[0].to_tensor(),
                upsample_ref(x.to(DType::Float64), s[2] * 3, s[3] * 2, true, false, 3, 2), 1e-12, 1e-12);
  }
  // a size, or bilinear with align_corners, where the input's size is read when the graph runs: the source
  // indices and weights are computed there, as the static path computes them
  const char* sized = "import torch.nn.functional as F\nfrom torch import Tensor\n\n\n"
                      "def g(x: Tensor) -> Tensor:\n    return F.interpolate(x, size=(5, 6), mode='bilinear', align_corners=True)\n\n\n"
                      "def h(x: Tensor) -> Tensor:\n    return F.interpolate(x, size=(3, 7))\n\n\n"
                      "def k(x: Tensor) -> Tensor:\n    return F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=True)\n\n\n"
                      "def m(x: Tensor) -> Tensor:\n    return F.interpolate(x, scale_factor=1.5, mode='bilinear')\n";
  ScriptFile fs = script_source(sized, "sized.py");
  for (Shape s : {Shape{1, 2, 2, 3}, Shape{2, 1, 5, 4}, Shape{1, 1, 1, 1}}) {
    CAPTURE(shape_str(s));
    Tensor x = randn(s);
    check_close(fs.function("g").call({x})[0].to_tensor(), interpolate(x, Shape{5, 6}, std::nullopt, "bilinear", true));
    check_close(compile(fs.function("g"))({x})[0], interpolate(x, Shape{5, 6}, std::nullopt, "bilinear", true));
    check_close(fs.function("h").call({x})[0].to_tensor(), interpolate(x, Shape{3, 7}));
    check_close(fs.function("k").call({x})[0].to_tensor(), interpolate(x, std::nullopt, std::vector<double>{2}, "bilinear", true));
    check_close(compile(fs.function("k"))({x})[0], interpolate(x, std::nullopt, std::vector<double>{2}, "bilinear", true));
  }
  check_error([&] { fs.function("m").call({randn({1, 1, 2, 2})}); },
              "interpolate: a script graph whose input shape is unknown when it is lowered needs a size or an integer "
              "scale_factor; mode 'bilinear' with a fractional scale_factor needs the input's size to know the output's");
}
