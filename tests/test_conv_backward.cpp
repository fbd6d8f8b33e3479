// The gradient kernels of conv2d and avg_pool2d (conv2d_backward_input, conv2d_backward_weight,
// avg_pool2d_backward): each against a float64 reference computed here with direct loops, then
// conv2d / avg_pool2d backward through autograd against finite differences; the one-pass
// conv2d_backward (the JIT's conv-backward groups) against the ops.
#include <cmath>

#include "eager/cpu/conv_one_pixel.h"
#include "eager/cpu/conv_onednn.h"
#include "eager/cpu/gemm_epilogue.h"
#include "eager/autograd/gradcheck.h"
#include "eager/cpu/conv_backward.h"
#include "support.h"

namespace kiln {
namespace {

using test::check_close;
using test::check_error;
using test::values;

using test::seq;

struct ConvArgs {
  Shape s, p, d;
  int64_t groups;
  Attrs attrs(const Shape& shape) const {
    return Attrs().set("stride", s).set("padding", p).set("dilation", d).set("groups", groups).set("shape", shape);
  }
};

// Visits every (n, o, oh, ow, c, ki, kj) tap of conv2d with input shape xs [N,C,H,W] and weight shape ws
// that reads inside the input, calling f(x_index, w_index, y_index).
template <class F>
void for_each_tap(const Shape& xs, const Shape& ws, const ConvArgs& a, F&& f) {
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  int64_t O = ws[0], Cg = ws[1], kh = ws[2], kw = ws[3], Og = O / a.groups;
  int64_t OH = (H + 2 * a.p[0] - a.d[0] * (kh - 1) - 1) / a.s[0] + 1;
  int64_t OW = (W + 2 * a.p[1] - a.d[1] * (kw - 1) - 1) / a.s[1] + 1;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int64_t cg = 0; cg < Cg; ++cg)
            for (int64_t ki = 0; ki < kh; ++ki)
              for (int64_t kj = 0; kj < kw; ++kj) {
                int64_t ih = oh * a.s[0] - a.p[0] + ki * a.d[0], iw = ow * a.s[1] - a.p[1] + kj * a.d[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int64_t c = (o / Og) * Cg + cg;
                f(((n * C + c) * H + ih) * W + iw, ((o * Cg + cg) * kh + ki) * kw + kj,
                  ((n * O + o) * OH + oh) * OW + ow);
              }
}

Tensor ref_backward_input(const Tensor& g, const Tensor& w, const Shape& xs, const ConvArgs& a) {
  auto G = values(g), Wv = values(w);
  std::vector<double> out(size_t(numel_of(xs)), 0.0);
  for_each_tap(xs, w.sizes(), a, [&](int64_t xi, int64_t wi, int64_t yi) { out[size_t(xi)] += Wv[size_t(wi)] * G[size_t(yi)]; });
  return tensor(out, xs, DType::Float64);
}

Tensor ref_backward_weight(const Tensor& g, const Tensor& x, const Shape& ws, const ConvArgs& a) {
  auto G = values(g), X = values(x);
  std::vector<double> out(size_t(numel_of(ws)), 0.0);
  for_each_tap(x.sizes(), ws, a, [&](int64_t xi, int64_t wi, int64_t yi) { out[size_t(wi)] += X[size_t(xi)] * G[size_t(yi)]; });
  return tensor(out, ws, DType::Float64);
}

Tensor ref_avg_pool_backward(const Tensor& g, const Shape& xs, Shape k, Shape s, Shape p) {
  auto G = values(g);
  int64_t H = xs[xs.size() - 2], W = xs[xs.size() - 1], OH = g.size(-2), OW = g.size(-1);
  int64_t planes = numel_of(xs) / (H * W);
  std::vector<double> out(size_t(numel_of(xs)), 0.0);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t ki = 0; ki < k[0]; ++ki)
          for (int64_t kj = 0; kj < k[1]; ++kj) {
            int64_t ih = oh * s[0] - p[0] + ki, iw = ow * s[1] - p[1] + kj;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            out[size_t((pl * H + ih) * W + iw)] += G[size_t((pl * OH + oh) * OW + ow)] / double(k[0] * k[1]);
          }
  return tensor(out, xs, DType::Float64);
}

struct Case {
  Shape x, w;
  ConvArgs a;
};
const Case kCases[] = {
    {{2, 3, 7, 6}, {4, 3, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}},
    {{2, 4, 9, 8}, {6, 2, 3, 3}, {{2, 2}, {1, 1}, {2, 2}, 2}},   // stride 2, padding 1, dilation 2, groups 2
    {{1, 3, 7, 6}, {4, 3, 3, 2}, {{2, 1}, {1, 2}, {1, 1}, 1}},
    {{2, 6, 5, 5}, {6, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 6}},   // depthwise
    {{2, 4, 5, 4}, {6, 2, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 2}},   // 1x1 pointwise
    {{2, 1, 3, 3}, {2, 1, 2, 2}, {{5, 5}, {2, 2}, {1, 1}, 1}},   // stride past padding
    {{3, 2, 6, 7}, {4, 2, 2, 3}, {{3, 2}, {1, 0}, {2, 1}, 1}},
};

Shape conv_out_shape(const Case& c) {
  int64_t OH = (c.x[2] + 2 * c.a.p[0] - c.a.d[0] * (c.w[2] - 1) - 1) / c.a.s[0] + 1;
  int64_t OW = (c.x[3] + 2 * c.a.p[1] - c.a.d[1] * (c.w[3] - 1) - 1) / c.a.s[1] + 1;
  return {c.x[0], c.w[0], OH, OW};
}

// A case's operands and the two gradient ops' results on them.
struct OpGrads {
  Tensor x, w, g, gx, gw;
  double tol;
};
OpGrads op_grads(const Case& c, DType dt) {
  OpGrads r{seq(c.x, 0.37, 0.2, dt), seq(c.w, 0.61, 0.5, dt), seq(conv_out_shape(c), 0.29, 0.7, dt), {}, {},
            dt == DType::Float64 ? 1e-12 : 1e-4};
  r.gx = dispatch1(OpId::Conv2dBackwardInput, {r.g, r.w}, c.a.attrs(c.x));
  r.gw = dispatch1(OpId::Conv2dBackwardWeight, {r.g, r.x}, c.a.attrs(c.w));
  return r;
}

}  // namespace

TEST_CASE("conv backward: backward_input and backward_weight match direct loops") {
  for (DType dt : {DType::Float64, DType::Float32}) {
    for (const Case& c : kCases) {
      CAPTURE(shape_str(c.x));
      CAPTURE(shape_str(c.w));
      auto [x, w, g, gx, gw, tol] = op_grads(c, dt);
      CHECK(gx.dtype() == dt);
      CHECK(gw.dtype() == dt);
      check_close(gx, ref_backward_input(g, w, c.x, c.a), tol, tol);
      check_close(gw, ref_backward_weight(g, x, c.w, c.a), tol, tol);
    }
  }
}

TEST_CASE("conv backward: the one-pass conv2d_backward equals the ops, any subset of its gradients") {
  for (DType dt : {DType::Float64, DType::Float32}) {
    for (const Case& c : kCases) {
      CAPTURE(shape_str(c.x));
      CAPTURE(shape_str(c.w));
      auto [x, w, g, gx, gw, tol] = op_grads(c, dt);
      Tensor gb = sum(g, {0, 2, 3});
      for (int mask = 1; mask < 8; ++mask) {
        CAPTURE(mask);
        bool in = mask & 1, wt = mask & 2, b = mask & 4;
        std::optional<cpu::ConvGrads> r = cpu::conv2d_backward(g, x, w, c.x, c.w, c.a.attrs(c.x), in, wt, b);
        REQUIRE(r.has_value());
        CHECK(r->input.defined() == in);
        CHECK(r->weight.defined() == wt);
        CHECK(r->bias.defined() == b);
        if (in) check_close(r->input, gx, tol, tol);
        if (wt) check_close(r->weight, gw, tol, tol);
        if (b) check_close(r->bias, gb, tol, tol);
      }
    }
  }
  // What it does not take, the caller runs as ops: a 3-D input, an integer gradient.
  ConvArgs a{{1, 1}, {1, 1}, {1, 1}, 1};
  Tensor w = seq({2, 3, 3, 3}, 0.1);
  CHECK_FALSE(cpu::conv2d_backward(seq({2, 5, 5}, 0.1), Tensor(), w, {3, 5, 5}, w.sizes(), a.attrs({}), true, false,
                                   true));
  CHECK_FALSE(cpu::conv2d_backward(seq({1, 2, 5, 5}, 0.1).to(DType::Int64), Tensor(), w, {1, 3, 5, 5}, w.sizes(),
                                   a.attrs({}), true, false, false));
}

TEST_CASE("conv backward: oneDNN's primitives (compiled conv2d nodes and conv-backward groups) equal kiln's kernels") {
  struct OneDnnCase {
    Shape x, w;
    ConvArgs a;
  };
  const OneDnnCase cases[] = {
      {{4, 16, 4, 4}, {32, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},  // the digits CNN's second conv
      {{3, 8, 7, 6}, {5, 8, 3, 2}, {{2, 1}, {1, 0}, {1, 2}, 1}},      // stride, padding, dilation per dim
  };
  for (const OneDnnCase& c : cases) {
    CAPTURE(shape_str(c.x));
    Shape gs = conv_out_shape(Case{c.x, c.w, c.a});
    Tensor x = seq(c.x, 0.37, 0.2, DType::Float32), w = seq(c.w, 0.61, 0.5, DType::Float32),
           g = seq(gs, 0.29, 0.7, DType::Float32);
    for (int mask : {7, 6, 1, 2, 3}) {
      CAPTURE(mask);
      bool in = mask & 1, wt = mask & 2, b = mask & 4;
      std::optional<cpu::ConvGrads> want = cpu::conv2d_backward(g, x, w, c.x, c.w, c.a.attrs(c.x), in, wt, b);
      std::optional<cpu::ConvGrads> got = cpu::onednn_conv2d_backward(g, x, w, c.x, c.w, c.a.attrs(c.x), in, wt, b);
      REQUIRE(want.has_value());
      if (!cpu::onednn_gemm_enabled()) {
        CHECK_FALSE(got.has_value());
        continue;
      }
      REQUIRE(got.has_value());
      if (in) check_close(got->input, want->input, 1e-5, 1e-4);
      if (wt) check_close(got->weight, want->weight, 1e-5, 1e-4);
      if (b) check_close(got->bias, want->bias, 1e-5, 1e-4);
    }
    // The forward, with and without a bias (eager's conv2d runs on it).
    Tensor bias = seq({c.w[0]}, 0.3, 0.1, DType::Float32);
    Attrs fa = c.a.attrs({}).without("shape");
    for (bool with_bias : {true, false}) {
      std::optional<Tensor> y = cpu::onednn_conv2d(x, w, with_bias ? bias : Tensor(), fa);
      if (!cpu::onednn_gemm_enabled()) {
        CHECK_FALSE(y.has_value());
        continue;
      }
      REQUIRE(y.has_value());
      cpu::set_onednn_gemm(false);  // eager's conv2d takes oneDNN too: the reference is the im2col path
      Tensor want = conv2d(x, w, with_bias ? bias : Tensor(), c.a.s, c.a.p, c.a.d);
      cpu::set_onednn_gemm(true);
      check_close(*y, want, 1e-5, 1e-4);
    }
  }
  // Few input channels (kiln's im2col path is as fast) and groups decline.
  Tensor w4 = seq({4, 4, 3, 3}, 0.1, 0.1, DType::Float32), g4 = seq({2, 4, 5, 5}, 0.2, 0.1, DType::Float32);
  ConvArgs a{{1, 1}, {1, 1}, {1, 1}, 1};
  CHECK_FALSE(cpu::onednn_conv2d_backward(g4, Tensor(), w4, {2, 4, 5, 5}, w4.sizes(), a.attrs({}), true, false, false));
}

TEST_CASE("conv backward: a parameter's blocked weights are reused until it changes") {
  if (!cpu::onednn_gemm_enabled()) return;
  Tensor x = seq({2, 16, 3, 3}, 0.37, 0.2, DType::Float32), g = seq({2, 32, 3, 3}, 0.29, 0.7, DType::Float32);
  Tensor w = seq({32, 16, 3, 3}, 0.61, 0.5, DType::Float32);
  set_memory_category(w, MemoryCategory::Parameter);
  ConvArgs a{{1, 1}, {1, 1}, {1, 1}, 1};
  Attrs fa = a.attrs({}).without("shape");
  // backward_first: the backward-data copy is made from oihw, not from the forward's blocked copy
  auto check = [&](bool backward_first = false) {
    cpu::set_onednn_gemm(false);
    Tensor want = conv2d(x, w, Tensor(), a.s, a.p, a.d);
    std::optional<cpu::ConvGrads> want_g = cpu::conv2d_backward(g, x, w, x.sizes(), w.sizes(), a.attrs(x.sizes()), true, false, false);
    cpu::set_onednn_gemm(true);
    for (int twice = 0; twice < 2; ++twice) {  // the second call reads the cached copies
      std::optional<cpu::ConvGrads> got;
      if (backward_first) got = cpu::onednn_conv2d_backward(g, x, w, x.sizes(), w.sizes(), a.attrs(x.sizes()), true, false, false);
      std::optional<Tensor> y = cpu::onednn_conv2d(x, w, Tensor(), fa);
      if (!backward_first) got = cpu::onednn_conv2d_backward(g, x, w, x.sizes(), w.sizes(), a.attrs(x.sizes()), true, false, false);
      REQUIRE(y.has_value());
      REQUIRE(got.has_value());
      check_close(*y, want, 1e-5, 1e-4);
      check_close(got->input, want_g->input, 1e-5, 1e-4);
    }
  };
  check();
  {
    NoGradGuard no_grad;
    w.mul_(Scalar(-0.5));  // in place: a new version, so the copies are stale
  }
  check();
  w.copy_(seq({32, 16, 3, 3}, 0.2, 0.3, DType::Float32));
  check();
  w.copy_(seq({32, 16, 3, 3}, 0.4, 0.1, DType::Float32));
  check(true);
}

TEST_CASE("conv backward: one-pixel convs (one tap meets each input pixel) as GEMMs equal direct loops") {
  const Case cases[] = {
      {{3, 16, 1, 1}, {8, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},  // ResNet's last stage
      {{2, 5, 1, 1}, {4, 5, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 1}},    // stride 2
      {{2, 5, 1, 1}, {4, 5, 3, 1}, {{1, 1}, {2, 0}, {2, 1}, 1}},    // dilation 2, padding 2
      {{2, 5, 1, 1}, {4, 5, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}},    // pointwise
      // one output pixel from a larger input: each input pixel meets its own tap
      {{3, 6, 2, 2}, {4, 6, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 1}},    // ResNet's stride-2 conv into its last stage
      {{2, 5, 3, 2}, {4, 5, 3, 2}, {{1, 1}, {0, 0}, {1, 1}, 1}},    // every tap, no padding
      {{2, 5, 2, 2}, {4, 5, 1, 1}, {{2, 2}, {0, 0}, {1, 1}, 1}},    // the 1x1 downsample: three pixels unread
      {{2, 5, 3, 3}, {4, 5, 2, 2}, {{2, 2}, {0, 0}, {2, 2}, 1}},    // dilation 2: the middle row and column unread
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.w));
    Shape ys = conv_out_shape(c);
    REQUIRE(ys == Shape{c.x[0], c.w[0], 1, 1});
    Tensor x = seq(c.x, 0.37, 0.2, DType::Float32), w = seq(c.w, 0.61, 0.5, DType::Float32),
           g = seq(ys, 0.29, 0.7, DType::Float32), b = seq({c.w[0]}, 0.3, 0.1, DType::Float32);
    auto X = values(x), Wv = values(w), B = values(b);
    std::vector<double> y(size_t(numel_of(ys)));
    for (size_t i = 0; i < y.size(); ++i) y[i] = B[i % size_t(c.w[0])];
    for_each_tap(c.x, c.w, c.a, [&](int64_t xi, int64_t wi, int64_t yi) { y[size_t(yi)] += X[size_t(xi)] * Wv[size_t(wi)]; });
    std::optional<Tensor> got = cpu::one_pixel_conv2d(x, w, b, c.a.attrs({}).without("shape"));
    REQUIRE(got.has_value());
    check_close(*got, tensor(y, ys, DType::Float64), 1e-5, 1e-4);
    std::optional<cpu::ConvGrads> r = cpu::one_pixel_conv2d_backward(g, x, w, c.x, c.w, c.a.attrs(c.x), true, true, true);
    REQUIRE(r.has_value());
    check_close(r->input, ref_backward_input(g, w, c.x, c.a), 1e-5, 1e-4);
    check_close(r->weight, ref_backward_weight(g, x, c.w, c.a), 1e-5, 1e-4);
    check_close(r->bias, sum(g, {0, 2, 3}), 1e-5, 1e-4);
  }
  // More than one pixel in or out, or no tap on the pixel: declined.
  Tensor w = seq({4, 5, 3, 3}, 0.61, 0.5, DType::Float32);
  ConvArgs a{{1, 1}, {1, 1}, {1, 1}, 1};
  CHECK_FALSE(cpu::one_pixel_conv2d(seq({2, 5, 2, 2}, 0.1, 0.1, DType::Float32), w, Tensor(), a.attrs({}).without("shape")));
  CHECK_FALSE(cpu::one_pixel_conv2d(seq({2, 5, 1, 1}, 0.1, 0.1, DType::Float32), seq({4, 5, 1, 1}, 0.1, 0.1, DType::Float32),
                                    Tensor(), a.attrs({}).without("shape")));  // a 3x3 output
  ConvArgs gap{{1, 1}, {1, 1}, {2, 2}, 1};  // dilation 2, padding 1: the taps straddle the pixel
  CHECK_FALSE(cpu::one_pixel_conv2d(seq({2, 5, 1, 1}, 0.1, 0.1, DType::Float32), seq({4, 5, 2, 2}, 0.1, 0.1, DType::Float32),
                                    Tensor(), gap.attrs({}).without("shape")));
}

TEST_CASE("conv backward: a parameter's one-pixel tap slice is reused until it changes") {
  ConvArgs a{{1, 1}, {1, 1}, {1, 1}, 1};
  Shape xs{3, 16, 1, 1}, ws{8, 16, 3, 3};
  Tensor x = seq(xs, 0.37, 0.2, DType::Float32), g = seq({3, 8, 1, 1}, 0.29, 0.7, DType::Float32);
  Tensor w = seq(ws, 0.61, 0.5, DType::Float32);
  set_memory_category(w, MemoryCategory::Parameter);
  auto check = [&] {
    Tensor want = conv2d(x.to(DType::Float64), w.to(DType::Float64), Tensor(), a.s, a.p, a.d);
    for (int twice = 0; twice < 2; ++twice) {  // the second call reads the cached slice
      std::optional<Tensor> y = cpu::one_pixel_conv2d(x, w, Tensor(), a.attrs({}).without("shape"));
      std::optional<cpu::ConvGrads> r = cpu::one_pixel_conv2d_backward(g, x, w, xs, ws, a.attrs(xs), true, false, false);
      REQUIRE(y.has_value());
      REQUIRE(r.has_value());
      check_close(*y, want, 1e-5, 1e-4);
      check_close(r->input, ref_backward_input(g, w, xs, a), 1e-5, 1e-4);
    }
  };
  check();
  {
    NoGradGuard no_grad;
    w.mul_(Scalar(-0.5));  // in place: a new version, so the slice is stale
  }
  check();
  w.copy_(seq(ws, 0.2, 0.3, DType::Float32));
  check();
}

TEST_CASE("conv backward: a batch split into chunks") {
  // f64 samples of (96*9 + 16) x 40*40 columns exceed a third of the 32 MiB chunk, so the batch of 3 is
  // unfolded and multiplied as 2 + 1 samples.
  ConvArgs a{{1, 1}, {1, 1}, {1, 1}, 1};
  Shape xs{3, 96, 40, 40}, ws{16, 96, 3, 3};
  Tensor x = seq(xs, 0.013), w = seq(ws, 0.31), g = seq({3, 16, 40, 40}, 0.29);
  check_close(dispatch1(OpId::Conv2dBackwardInput, {g, w}, a.attrs(xs)), ref_backward_input(g, w, xs, a), 1e-10, 1e-10);
  check_close(dispatch1(OpId::Conv2dBackwardWeight, {g, x}, a.attrs(ws)), ref_backward_weight(g, x, ws, a), 1e-10,
              1e-10);
}

TEST_CASE("conv backward: unbatched and non-contiguous inputs") {
  ConvArgs a{{2, 2}, {1, 1}, {2, 2}, 2};
  Shape xs{4, 9, 8}, ws{6, 2, 3, 3};
  Tensor x = seq(xs, 0.37), w = seq(ws, 0.61), g = seq({6, 4, 3}, 0.29);
  Tensor gx = dispatch1(OpId::Conv2dBackwardInput, {g, w}, a.attrs(xs));
  CHECK(gx.sizes() == xs);
  check_close(gx, ref_backward_input(g.unsqueeze(0), w, {1, 4, 9, 8}, a).squeeze(0), 1e-12, 1e-12);
  Tensor gw = dispatch1(OpId::Conv2dBackwardWeight, {g, x}, a.attrs(ws));
  check_close(gw, ref_backward_weight(g.unsqueeze(0), x.unsqueeze(0), ws, a), 1e-12, 1e-12);

  // Transposed views of every operand.
  Tensor xt = seq({2, 8, 9, 4}, 0.41).transpose(1, 3);  // [2,4,9,8]
  Tensor wt = seq({6, 2, 3, 3}, 0.23).transpose(2, 3);
  REQUIRE(!xt.is_contiguous());
  REQUIRE(!wt.is_contiguous());
  Shape g4{2, 6, 4, 3};
  Tensor gt4 = seq(g4, 0.19).transpose(0, 1).contiguous().transpose(0, 1);
  REQUIRE(!gt4.is_contiguous());
  check_close(dispatch1(OpId::Conv2dBackwardInput, {gt4, wt}, a.attrs({2, 4, 9, 8})),
              ref_backward_input(gt4, wt, {2, 4, 9, 8}, a), 1e-12, 1e-12);
  check_close(dispatch1(OpId::Conv2dBackwardWeight, {gt4, xt}, a.attrs(ws)), ref_backward_weight(gt4, xt, ws, a),
              1e-12, 1e-12);
}

TEST_CASE("conv backward: avg_pool2d_backward matches a direct loop") {
  struct P {
    Shape x, k, s, p;
  };
  const P cases[] = {
      {{2, 3, 5, 5}, {3, 3}, {2, 2}, {1, 1}},
      {{3, 6, 7}, {2, 3}, {1, 2}, {1, 0}},  // unbatched
      {{1, 2, 6, 6}, {2, 2}, {}, {0, 0}},   // empty stride means kernel_size
      {{2, 1, 7, 5}, {3, 2}, {3, 1}, {0, 1}},
  };
  for (DType dt : {DType::Float64, DType::Float32, DType::BFloat16}) {
    for (const P& c : cases) {
      CAPTURE(shape_str(c.x));
      Tensor x = seq(c.x, 0.37, 0.2, dt);
      Tensor y = avg_pool2d(x, c.k, c.s, c.p);
      Tensor g = seq(y.sizes(), 0.29, 0.7, dt);
      Shape s = c.s.empty() ? c.k : c.s;
      Attrs attrs = Attrs().set("kernel_size", c.k).set("stride", c.s).set("padding", c.p).set("shape", c.x);
      Tensor gx = dispatch1(OpId::AvgPool2dBackward, {g.transpose(-1, -2).contiguous().transpose(-1, -2)}, attrs);
      CHECK(gx.dtype() == dt);
      double tol = dt == DType::Float64 ? 1e-12 : dt == DType::Float32 ? 1e-5 : 2e-2;
      check_close(gx, ref_avg_pool_backward(g, c.x, c.k, s, c.p), tol, tol);
    }
  }
}

TEST_CASE("conv backward: autograd against finite differences") {
  auto leaf = [](const Shape& s, double a) { return seq(s, a, 0.3).requires_grad_(); };
  // stride 2, padding 1, dilation 2, groups 2, with bias.
  Tensors in{leaf({2, 4, 9, 8}, 0.37), leaf({6, 2, 3, 3}, 0.61), leaf({6}, 1.3)};
  CHECK_NOTHROW(gradcheck([](const Tensors& t) { return conv2d(t[0], t[1], t[2], {2, 2}, {1, 1}, {2, 2}, 2).sum(); }, in));
  CHECK_NOTHROW(gradcheck([](const Tensors& t) { return conv2d(t[0], t[1], t[2], {2, 2}, {1, 1}, {2, 2}, 2); }, in));
  // Unbatched, and the second order through the backward ops themselves.
  Tensors in3{leaf({3, 6, 5}, 0.41), leaf({4, 3, 2, 3}, 0.23)};
  CHECK_NOTHROW(gradcheck([](const Tensors& t) { return conv2d(t[0], t[1], {}, {1, 2}, {1, 0}, {2, 1}, 1); }, in3));
  CHECK_NOTHROW(gradgradcheck([](const Tensors& t) { return conv2d(t[0], t[1], {}, {2, 1}, {1, 1}, {1, 2}, 1); }, in3));
  Tensors p{leaf({2, 3, 5, 5}, 0.37)};
  CHECK_NOTHROW(gradcheck([](const Tensors& t) { return avg_pool2d(t[0], {3, 3}, {2, 2}, {1, 1}); }, p));
  CHECK_NOTHROW(gradgradcheck([](const Tensors& t) { Tensor y = avg_pool2d(t[0], {3, 2}, {}, {1, 0}); return y * y; }, p));

  // The same gradient by hand: d(sum conv2d)/dx, dw against the direct loops.
  Tensor x = leaf({2, 4, 9, 8}, 0.37), w = leaf({6, 2, 3, 3}, 0.61);
  ConvArgs a{{2, 2}, {1, 1}, {2, 2}, 2};
  Tensor y = conv2d(x, w, {}, a.s, a.p, a.d, a.groups);
  y.sum().backward();
  Tensor ones = tensor(std::vector<double>(size_t(y.numel()), 1.0), y.sizes(), DType::Float64);
  check_close(x.grad(), ref_backward_input(ones, w, x.sizes(), a), 1e-12, 1e-12);
  check_close(w.grad(), ref_backward_weight(ones, x, w.sizes(), a), 1e-12, 1e-12);
}

TEST_CASE("conv backward: errors") {
  Tensor w = seq({4, 3, 3, 3}), g = seq({2, 4, 5, 5}), x = seq({2, 3, 7, 7});
  Attrs a = Attrs().set("stride", Shape{1, 1}).set("padding", Shape{0, 0}).set("dilation", Shape{1, 1}).set("groups", int64_t(1));
  Attrs ax = a, aw = a;
  ax.set("shape", Shape{2, 3, 7, 7});
  aw.set("shape", Shape{4, 3, 3, 3});
  check_error([&] { dispatch1(OpId::Conv2dBackwardInput, {seq({2, 4, 4, 5}), w}, ax); }, "conv2d_backward_input: expected grad_output of shape [2,4,5,5]");
  check_error([&] { dispatch1(OpId::Conv2dBackwardInput, {g, w.to(DType::Float32)}, ax); }, "conv2d_backward_input: grad_output dtype float64 and weight dtype float32 differ");
  check_error([&] { dispatch1(OpId::Conv2dBackwardInput, {g.to(DType::Int64), w.to(DType::Int64)}, ax); }, "conv2d_backward_input: dtype int64 is not supported");
  check_error([&] { dispatch1(OpId::Conv2dBackwardWeight, {g, seq({2, 6, 7, 7})}, aw); }, "conv2d_backward_weight: expected input with 3 channels");
  Attrs bad = aw;
  bad.set("stride", Shape{1});
  check_error([&] { dispatch1(OpId::Conv2dBackwardWeight, {g, x}, bad); }, "conv2d_backward_weight: stride must have 2 elements");
  Attrs p = Attrs().set("kernel_size", Shape{2, 2}).set("stride", Shape{2, 2}).set("padding", Shape{0, 0}).set("shape", Shape{1, 4, 4});
  check_error([&] { dispatch1(OpId::AvgPool2dBackward, {seq({1, 3, 2})}, p); }, "avg_pool2d_backward: expected grad_output of shape [1,2,2]");
  check_error([&] { dispatch1(OpId::AvgPool2dBackward, {seq({1, 2, 2}).to(DType::Int32)}, p); }, "avg_pool2d_backward: dtype int32 is not supported");
}

}  // namespace kiln
