// nn and indexing ops: conv2d, pooling, cat, index_select, gather and the nn functional composites,
// each against a float64 reference computed here with direct loops, plus a few values from PyTorch 1.13
// (pasted as literals; inputs are sin/cos sequences so they are easy to rebuild on both sides).
#include <cmath>
#include <limits>

#include "eager/cpu/scatter.h"
#include "support.h"

namespace kiln {
namespace {

using test::check_close;
using test::check_error;
using test::values;

using test::seq;

Tensor f64(const std::vector<double>& v, const Shape& shape) { return tensor(v, shape, DType::Float64); }

// Direct convolution in float64.
Tensor ref_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, Shape s, Shape p, Shape d, int64_t groups) {
  auto X = values(x), Wv = values(w);
  std::vector<double> B = b.defined() ? values(b) : std::vector<double>{};
  int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  int64_t O = w.size(0), Cg = w.size(1), kh = w.size(2), kw = w.size(3), Og = O / groups;
  int64_t OH = (H + 2 * p[0] - d[0] * (kh - 1) - 1) / s[0] + 1, OW = (W + 2 * p[1] - d[1] * (kw - 1) - 1) / s[1] + 1;
  std::vector<double> Y(size_t(N * O * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = B.empty() ? 0.0 : B[size_t(o)];
          int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t ih = oh * s[0] - p[0] + i * d[0], iw = ow * s[1] - p[1] + j * d[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += X[size_t(((n * C + g * Cg + c) * H + ih) * W + iw)] * Wv[size_t(((o * Cg + c) * kh + i) * kw + j)];
              }
          Y[size_t(((n * O + o) * OH + oh) * OW + ow)] = acc;
        }
  return f64(Y, {N, O, OH, OW});
}

// Direct max pooling over [P,H,W] planes: values and flat indices; padding taps never win.
std::pair<Tensor, Tensor> ref_max_pool(const Tensor& x, Shape k, Shape s, Shape p, Shape d) {
  auto X = values(x);
  int64_t H = x.size(x.dim() - 2), W = x.size(x.dim() - 1);
  int64_t P = x.numel() / (H * W);
  int64_t OH = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) / s[0] + 1, OW = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) / s[1] + 1;
  std::vector<double> V;
  std::vector<int64_t> I;
  for (int64_t pl = 0; pl < P; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -INFINITY;
        int64_t bi = -1;
        for (int64_t i = 0; i < k[0]; ++i)
          for (int64_t j = 0; j < k[1]; ++j) {
            int64_t ih = oh * s[0] - p[0] + i * d[0], iw = ow * s[1] - p[1] + j * d[1];
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            double v = X[size_t((pl * H + ih) * W + iw)];
            if (bi < 0 || v > best || std::isnan(v)) best = v, bi = ih * W + iw;  // torch: the last NaN wins
          }
        V.push_back(best);
        I.push_back(bi);
      }
  Shape os = x.sizes();
  os[os.size() - 2] = OH;
  os[os.size() - 1] = OW;
  return {f64(V, os), tensor(I, os)};
}

Tensor ref_avg_pool(const Tensor& x, Shape k, Shape s, Shape p) {
  auto X = values(x);
  int64_t H = x.size(x.dim() - 2), W = x.size(x.dim() - 1), P = x.numel() / (H * W);
  int64_t OH = (H + 2 * p[0] - k[0]) / s[0] + 1, OW = (W + 2 * p[1] - k[1]) / s[1] + 1;
  std::vector<double> V;
  for (int64_t pl = 0; pl < P; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double acc = 0;
        for (int64_t i = 0; i < k[0]; ++i)
          for (int64_t j = 0; j < k[1]; ++j) {
            int64_t ih = oh * s[0] - p[0] + i, iw = ow * s[1] - p[1] + j;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) acc += X[size_t((pl * H + ih) * W + iw)];
          }
        V.push_back(acc / double(k[0] * k[1]));  // count_include_pad
      }
  Shape os = x.sizes();
  os[os.size() - 2] = OH;
  os[os.size() - 1] = OW;
  return f64(V, os);
}

// Row softmax of a [R, C] float64 reference along dim 1.
std::vector<double> ref_log_softmax_rows(const std::vector<double>& v, int64_t R, int64_t C) {
  std::vector<double> out(v.size());
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, v[size_t(r * C + c)]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(v[size_t(r * C + c)] - m);
    for (int64_t c = 0; c < C; ++c) out[size_t(r * C + c)] = v[size_t(r * C + c)] - m - std::log(s);
  }
  return out;
}

}  // namespace

TEST_CASE("nn ops: conv2d matches a direct loop") {
  struct Case {
    Shape x, w;
    Shape s, p, d;
    int64_t groups;
    bool bias;
  };
  const Case cases[] = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},
      {{1, 3, 7, 6}, {4, 3, 3, 2}, {2, 1}, {1, 2}, {1, 1}, 1, false},
      {{3, 4, 9, 8}, {6, 2, 3, 3}, {1, 2}, {2, 1}, {2, 3}, 2, true},   // groups + dilation
      {{2, 6, 5, 5}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, true},   // depthwise: direct loops
      {{2, 3, 6, 7}, {6, 1, 3, 2}, {2, 1}, {1, 1}, {1, 2}, 3, false},  // depthwise, channel multiplier 2
      {{1, 1, 6, 7}, {4, 1, 2, 3}, {1, 3}, {1, 1}, {2, 1}, 1, true},   // one input channel
      {{2, 4, 5, 4}, {6, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 2, true},   // 1x1 reads the input directly
      {{1, 4, 5, 4}, {8, 4, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false},  // 1x1, one sample
      {{2, 2, 4, 4}, {3, 2, 4, 4}, {3, 3}, {0, 0}, {1, 1}, 1, true},   // kernel covers the image
      {{2, 1, 3, 3}, {2, 1, 2, 2}, {5, 5}, {2, 2}, {1, 1}, 1, true},   // stride past padding
  };
  for (DType dt : {DType::Float64, DType::Float32}) {
    for (const Case& c : cases) {
      CAPTURE(shape_str(c.x));
      CAPTURE(shape_str(c.w));
      Tensor x = seq(c.x, 0.37, 0.2, dt), w = seq(c.w, 0.61, 0.5, dt);
      Tensor b = c.bias ? seq({c.w[0]}, 1.3, 0.0, dt) : Tensor();
      Tensor y = conv2d(x, w, b, c.s, c.p, c.d, c.groups);
      CHECK(y.dtype() == dt);
      double tol = dt == DType::Float64 ? 1e-12 : 1e-4;
      check_close(y, ref_conv2d(x, w, b, c.s, c.p, c.d, c.groups), tol, tol);
    }
  }
}

TEST_CASE("nn ops: conv2d on non-contiguous, unbatched and chunked inputs") {
  // Input and weight as transposed views: the kernel must not assume dense memory.
  Tensor xt = seq({2, 7, 3, 6}, 0.41).transpose(1, 2);  // [2,3,7,6], strided
  Tensor wt = seq({4, 3, 3, 3}, 0.23).transpose(2, 3);
  REQUIRE(!xt.is_contiguous());
  check_close(conv2d(xt, wt, {}, {1, 2}, {1, 1}), ref_conv2d(xt, wt, {}, {1, 2}, {1, 1}, {1, 1}, 1), 1e-12, 1e-12);
  Tensor xs = seq({2, 3, 10, 10}).slice(2, 1, 9, 2).slice(3, 0, 10, 3);  // [2,3,4,4] with steps
  Tensor w = seq({2, 3, 2, 2}, 0.9);
  check_close(conv2d(xs, w), ref_conv2d(xs, w, {}, {1, 1}, {0, 0}, {1, 1}, 1), 1e-12, 1e-12);

  // A 3-D input is one unbatched sample, as in torch.
  Tensor x3 = seq({3, 5, 5});
  Tensor w3 = seq({2, 3, 3, 3}, 0.7), b3 = f64({0.5, -1.0}, {2});
  Tensor y3 = conv2d(x3, w3, b3, {1, 1}, {1, 1});
  CHECK(y3.sizes() == Shape{2, 5, 5});
  check_close(y3, ref_conv2d(x3.unsqueeze(0), w3, b3, {1, 1}, {1, 1}, {1, 1}, 1).squeeze(0), 1e-12, 1e-12);

  // Single ints stand for both dims (torch's _pair).
  check_close(conv2d(x3.unsqueeze(0), w3, b3, {2}, {1}, {2}),
              ref_conv2d(x3.unsqueeze(0), w3, b3, {2, 2}, {1, 1}, {2, 2}, 1), 1e-12, 1e-12);

  // Many input channels make the batch's columns exceed one chunk, so it is split (2 + 1 samples here).
  Tensor xb = seq({3, 128, 40, 40}, 0.013), wb = seq({16, 128, 3, 3}, 0.31), bb = seq({16}, 0.5);
  check_close(conv2d(xb, wb, bb, {1, 1}, {1, 1}), ref_conv2d(xb, wb, bb, {1, 1}, {1, 1}, {1, 1}, 1), 1e-10, 1e-10);
  // Wide images: the batch's columns side by side in one GEMM.
  Tensor xw = seq({2, 3, 50, 50}, 0.017), ww = seq({4, 3, 3, 3}, 0.29), bw = seq({4}, 0.7);
  check_close(conv2d(xw, ww, bw, {1, 1}, {1, 1}), ref_conv2d(xw, ww, bw, {1, 1}, {1, 1}, {1, 1}, 1), 1e-10, 1e-10);
}

TEST_CASE("nn ops: conv2d against torch") {
  Tensor x = seq({1, 4, 5, 5});
  std::vector<double> wv;
  for (int i = 0; i < 36; ++i) wv.push_back(std::cos(0.7 * i));
  Tensor w = f64(wv, {2, 2, 3, 3}), b = f64({0.5, -0.25}, {2});
  // torch.nn.functional.conv2d(x, w, b, stride=(2,1), padding=(1,2), dilation=(1,2), groups=2)
  Tensor expected = f64({-1.3253154156857199, -2.126529527447551, -3.887948624850355, -2.239463446521459,
                         -2.136472619783051,  2.9863353142934237, 3.5343897036408984, 6.289204667280573,
                         4.2214717308084495,  3.429727830612764,  -2.6790542528182146, -2.947844784795548,
                         -4.70611346689065,   -2.939535077162564, -2.3717933605108574, -0.9010549168616885,
                         0.1533266224566504,  1.9214461408788885, 1.73159689179,       2.2158052829808565,
                         -0.5086760036485981, -1.4830251000810555, -4.59122464829195,  -4.35638097645014,
                         -4.450011912997474,  1.1630039629418263, 2.025874596220349,  4.0485072679804155,
                         3.2550842053118836,  3.470029543432683},
                        {1, 2, 3, 5});
  check_close(conv2d(x, w, b, {2, 1}, {1, 2}, {1, 2}, 2), expected, 1e-12, 1e-12);
}

TEST_CASE("nn ops: conv2d errors") {
  Tensor x = zeros({2, 5, 8, 8}), w = zeros({4, 3, 3, 3});
  check_error([&] { conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 1}, 2); },
              "conv2d: expected input with 6 channels (weight [4,3,3,3], groups 2), got 5");
  check_error([&] { conv2d(zeros({8, 8}), w); }, "conv2d: expected a 3-D [C,H,W] or 4-D [N,C,H,W] input, got shape [8,8]");
  check_error([&] { conv2d(zeros({1, 3, 8, 8}), zeros({4, 3, 3})); },
              "conv2d: expected a 4-D weight [out_channels,in_channels/groups,kh,kw], got shape [4,3,3]");
  check_error([&] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 5, 5})); },
              "conv2d: kernel size 5x5 (dilated 5x5) is larger than the padded input 4x4 (input [1,3,4,4])");
  check_error([&] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 3, 3}), {}, {1, 1}, {0, 0}, {2, 1}); },
              "conv2d: kernel size 3x3 (dilated 5x3) is larger than the padded input 4x4");
  check_error([&] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 3, 3}), {}, {0, 1}); }, "conv2d: stride must be positive, got [0,1]");
  check_error([&] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 3, 3}), {}, {1, 1}, {-1, 0}); },
              "conv2d: padding must be non-negative, got [-1,0]");
  check_error([&] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 3, 3}), {}, {1, 1}, {0, 0}, {1, 0}); },
              "conv2d: dilation must be positive, got [1,0]");
  check_error([&] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 3, 3}), {}, {1, 2, 3}); },
              "conv2d: stride must have 1 or 2 elements, got [1,2,3]");
  check_error([&] { conv2d(zeros({1, 4, 4, 4}), zeros({3, 2, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 2); },
              "conv2d: out_channels 3 (weight [3,2,3,3]) is not divisible by groups 2");
  check_error([&] { conv2d(zeros({1, 4, 4, 4}), zeros({4, 4, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 0); },
              "conv2d: groups must be positive, got 0");
  check_error([&] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 3, 3}), zeros({3})); },
              "conv2d: expected a bias of shape [2], got [3]");
  check_error([&] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 3, 3}), zeros({2}, DType::Float64)); },
              "conv2d: bias dtype float64 differs from input dtype float32");
  check_error([&] { conv2d(zeros({1, 3, 4, 4}, DType::Int64), zeros({2, 3, 3, 3}, DType::Int64)); },
              "conv2d: dtype int64 is not supported");
  check_error([&] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 3, 3}, DType::Float64)); },
              "conv2d: input dtype float32 and weight dtype float64 differ");
}

TEST_CASE("nn ops: max_pool2d matches a direct loop") {
  struct Case {
    Shape x, k, s, p, d;
  };
  const Case cases[] = {
      {{2, 3, 7, 6}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
      {{2, 3, 7, 6}, {3, 3}, {2, 1}, {1, 1}, {1, 1}},
      {{1, 2, 9, 9}, {3, 2}, {1, 2}, {1, 1}, {2, 3}},
      {{3, 6, 5}, {5, 1}, {1, 1}, {2, 0}, {1, 1}},  // 3-D input
      {{1, 1, 4, 4}, {4, 4}, {4, 4}, {2, 2}, {1, 1}},
  };
  for (DType dt : {DType::Float64, DType::Float32}) {
    for (const Case& c : cases) {
      CAPTURE(shape_str(c.x));
      Tensor x = seq(c.x, 0.77, 0.3, dt);
      auto [v, i] = max_pool2d_with_indices(x, c.k, c.s, c.p, c.d);
      auto [rv, ri] = ref_max_pool(x, c.k, c.s, c.p, c.d);
      check_close(v, rv, 0, 0);
      CHECK(i.dtype() == DType::Int64);
      check_close(i, ri, 0, 0);
      check_close(max_pool2d(x, c.k, c.s, c.p, c.d), rv, 0, 0);
    }
  }
  // The 2x2 windows of small images take a vector path four outputs at a time (rows of 16, 10, 8 and
  // 4 columns; 10 leaves one output to the scalar loop; rows two outputs wide go two rows at a time
  // across planes, an odd last row and an odd input height or width included): values from a small
  // set so windows tie, at zero as after a relu, and a few NaNs.
  for (Shape xs : {Shape{2, 3, 6, 16}, Shape{1, 2, 4, 10}, Shape{3, 2, 8, 8}, Shape{2, 2, 4, 4}, Shape{1, 3, 5, 4},
                   Shape{1, 1, 2, 5}, Shape{3, 1, 6, 4}, Shape{64, 32, 4, 4}}) {
    CAPTURE(shape_str(xs));
    Tensor x = (randint(-2, 3, xs).to(DType::Float32)).clone();
    float* px = static_cast<float*>(x.raw_data());
    for (int64_t i = 5; i < x.numel(); i += 37) px[i] = NAN;
    auto [v, i] = max_pool2d_with_indices(x, {2, 2});
    auto [rv, ri] = ref_max_pool(x, {2, 2}, {2, 2}, {0, 0}, {1, 1});
    check_close(i, ri, 0, 0);
    auto got = values(v), want = values(rv);
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      if (std::isnan(want[k])) CHECK(std::isnan(got[k]));
      else CHECK(got[k] == want[k]);
    }
  }
  // stride defaults to kernel_size; a transposed input is read through its strides.
  Tensor xt = seq({2, 8, 3, 6}, 0.57).transpose(1, 2);
  check_close(max_pool2d(xt, {2, 3}), ref_max_pool(xt, {2, 3}, {2, 3}, {0, 0}, {1, 1}).first, 0, 0);
  check_close(max_pool2d(xt, {2}), ref_max_pool(xt, {2, 2}, {2, 2}, {0, 0}, {1, 1}).first, 0, 0);
}

TEST_CASE("nn ops: max_pool2d against torch, NaN and errors") {
  Tensor x = seq({1, 2, 5, 5});
  auto [v, i] = max_pool2d_with_indices(x, {3, 3}, {2, 2}, {1, 1});
  check_close(v, f64({0.9995736030415051, 0.9463000876874145, 0.963558185417193, 0.9995736030415051, 0.9463000876874145,
                      0.5984721441039565, 0.11654920485049276, 0.6569865987187884, 0.850436620628564, 0.998941341839772,
                      0.998941341839772, 0.7984871126234903, 0.3190983623493521, 0.4201670368266409, 0.669569762196601,
                      0.9720075013949756, 0.9980266527163617, 0.9348950555246837},
                     {1, 2, 3, 3}),
              0, 0);
  CHECK(values(i) == std::vector<double>{5, 6, 4, 5, 6, 8, 21, 23, 24, 1, 1, 3, 5, 18, 19, 21, 22, 23});
  auto [v2, i2] = max_pool2d_with_indices(x, {3, 2}, {1, 2}, {1, 0}, {2, 1});
  CHECK(v2.sizes() == Shape{1, 2, 3, 2});
  CHECK(values(i2) == std::vector<double>{5, 7, 1, 3, 5, 7, 5, 18, 1, 22, 5, 18});

  // NaN wins its window, and the index is that of the last NaN seen (torch's scan order).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor xn = tensor(std::vector<float>{1, float(nan), 3, 4, 5, float(nan), 0, 1, 2}, {1, 1, 3, 3});
  auto [vn, in] = max_pool2d_with_indices(xn, {2, 2}, {1, 1});
  check_close(vn, tensor(std::vector<float>{float(nan), float(nan), 5, float(nan)}, {1, 1, 2, 2}), 0, 0);
  CHECK(values(in) == std::vector<double>{1, 5, 4, 5});

  check_error([&] { max_pool2d(zeros({1, 1, 5, 5}), {3, 3}, {1, 1}, {2, 0}); },
              "max_pool2d: padding [2,0] must be at most half of kernel_size [3,3]");
  check_error([&] { max_pool2d(zeros({1, 1, 5, 5}), {0, 3}); }, "max_pool2d: kernel_size must be positive, got [0,3]");
  check_error([&] { max_pool2d(zeros({1, 1, 5, 5}), {2, 2}, {0, 1}); }, "max_pool2d: stride must be positive, got [0,1]");
  check_error([&] { max_pool2d(zeros({1, 1, 5, 5}), {2, 2}, {}, {0, 0}, {0, 1}); },
              "max_pool2d: dilation must be positive, got [0,1]");
  check_error([&] { max_pool2d(zeros({1, 1, 2, 2}), {3, 3}); },
              "max_pool2d: output size is too small for input shape [1,1,2,2] with kernel_size [3,3], stride [3,3], "
              "padding [0,0], dilation [1,1]");
  check_error([&] { max_pool2d(zeros({5, 5}), {2, 2}); }, "max_pool2d: expected a 3-D [C,H,W] or 4-D [N,C,H,W] input, got shape [5,5]");
  check_error([&] { max_pool2d(zeros({1, 0, 5, 5}), {2, 2}); },
              "max_pool2d: expected non-zero sizes for the non-batch dims, got input shape [1,0,5,5]");
  check_error([&] { max_pool2d(zeros({1, 1, 5, 5}, DType::Int64), {2, 2}); }, "max_pool2d: dtype int64 is not supported");
  check_error([&] { max_pool2d(zeros({1, 1, 5, 5}), {2, 2, 2}); }, "max_pool2d: kernel_size must have 1 or 2 elements, got [2,2,2]");
  // Half types are pooled in float32 and stored back in their own dtype.
  Tensor xh = seq({1, 2, 6, 6}, 0.77, 0.3, DType::BFloat16);
  auto [vh, ih] = max_pool2d_with_indices(xh, {2, 2});
  CHECK(vh.dtype() == DType::BFloat16);
  auto [vf, iff] = max_pool2d_with_indices(xh.to(DType::Float32), {2, 2});
  check_close(vh, vf.to(DType::BFloat16), 0, 0);
  check_close(ih, iff, 0, 0);
  // An empty batch is fine.
  CHECK(max_pool2d(zeros({0, 2, 4, 4}), {2, 2}).sizes() == Shape{0, 2, 2, 2});
}

TEST_CASE("nn ops: max_pool2d's gradient goes to each window's first maximum, through the saved indices") {
  // Windows with ties (padded 3x3, overlapping 2x2 at stride 1, and the 2x2 stride-2 vector path); the
  // expected x.grad of sum(y * w), w = 1, 2, ..., is torch 1.13's.
  struct Case {
    std::vector<float> x;
    Shape shape, k, s, p;
    std::vector<double> grad;
  };
  const std::vector<float> x5 = {1, 1, 2, 0, 0, 1, 0, 2, 2, -1, 3, 3, -1, -1, -1, 3, 0, 5, 5, 5, 0, 0, 5, 5, 5};
  const std::vector<Case> cases = {
      {x5, {1, 1, 5, 5}, {3, 3}, {2, 2}, {1, 1},
       {1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 7, 0, 13, 15, 0, 0, 0, 0, 0, 0}},
      {x5, {1, 1, 5, 5}, {2, 2}, {1, 1}, {0, 0},
       {1, 0, 5, 0, 0, 0, 0, 7, 12, 0, 14, 6, 0, 0, 0, 13, 0, 50, 28, 0, 0, 0, 0, 0, 0}},
      {{1, 1, 2, 0, 0, 0, -1, -1, 1, 0, 2, 2, 0, 0, -1, -2, 3, 3, -1, 5, 7, 7, 4, 4, 3, 3, 5, 5, 7, 7, 4, 4},
       {1, 1, 4, 8}, {2, 2}, {2, 2}, {0, 0},
       {1, 0, 2, 0, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 6, 7, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.k));
    Tensor x = tensor(c.x, c.shape).requires_grad_(true);
    Tensor y = max_pool2d(x, c.k, c.s, c.p);
    Tensor w = arange(1.0, double(y.numel()) + 1, 1.0).to(DType::Float32).reshape(y.sizes());
    Profiler prof;
    sum(y * w).backward();
    prof.stop();
    for (const OpProfile& op : prof.ops()) CHECK_MESSAGE(op.name != "max_pool2d", "the backward pooled again");
    CHECK(values(x.grad()) == c.grad);
  }
}

TEST_CASE("nn ops: avg_pool2d") {
  struct Case {
    Shape x, k, s, p;
  };
  const Case cases[] = {
      {{2, 3, 7, 6}, {2, 2}, {2, 2}, {0, 0}},
      {{2, 3, 7, 6}, {3, 3}, {2, 1}, {1, 1}},  // padding counts in the divisor
      {{4, 5, 5}, {5, 2}, {1, 3}, {2, 1}},
  };
  for (DType dt : {DType::Float64, DType::Float32}) {
    for (const Case& c : cases) {
      Tensor x = seq(c.x, 0.77, 0.3, dt);
      Tensor y = avg_pool2d(x, c.k, c.s, c.p);
      CHECK(y.dtype() == dt);
      check_close(y, ref_avg_pool(x, c.k, c.s, c.p), 1e-6, 1e-7);
    }
  }
  Tensor xt = seq({2, 6, 3, 6}).transpose(1, 2);
  check_close(avg_pool2d(xt, {3}), ref_avg_pool(xt, {3, 3}, {3, 3}, {0, 0}), 1e-12, 1e-12);
  // torch.nn.functional.avg_pool2d(x, 3, 2, 1)
  check_close(avg_pool2d(seq({1, 2, 5, 5}), {3, 3}, {2, 2}, {1, 1}),
              f64({0.2705694944093776, 0.4698195166628, 0.30427660716499455, -0.02713670723582425,
                   -0.19559541072746336, -0.21218340475351904, -0.22686187951993336, -0.15478465219211113,
                   0.037475634929244724, 0.2567483112971078, 0.216350299921787, 0.007966376095811375,
                   -0.24328772523326497, -0.36147528513275595, -0.19899415345502902, 0.13510196402983984,
                   0.3658582347149214, 0.3125426579914714},
                  {1, 2, 3, 3}),
              1e-12, 1e-12);
  check_error([&] { avg_pool2d(zeros({1, 1, 5, 5}), {2, 2}, {1, 1}, {0, 2}); },
              "avg_pool2d: padding [0,2] must be at most half of kernel_size [2,2]");
  check_error([&] { avg_pool2d(zeros({1, 1, 5, 5}, DType::Int32), {2, 2}); }, "avg_pool2d: dtype int32 is not supported");
  check_error([&] { avg_pool2d(zeros({1, 1, 2, 5}), {3, 3}); }, "avg_pool2d: output size is too small");
}

TEST_CASE("nn ops: cat") {
  Tensor a = arange(6).reshape({2, 3}), b = arange(6, 12).reshape({2, 3});
  CHECK(values(cat({a, b})) == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor c1 = cat({a, b}, 1);
  CHECK(c1.sizes() == Shape{2, 6});
  CHECK(values(c1) == std::vector<double>{0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11});
  CHECK(values(cat({a, b, a}, -1)) == std::vector<double>{0, 1, 2, 6, 7, 8, 0, 1, 2, 3, 4, 5, 9, 10, 11, 3, 4, 5});
  CHECK(cat({a}).sizes() == Shape{2, 3});

  // Type promotion over inputs; a non-contiguous input is copied through its strides.
  Tensor f = tensor(std::vector<float>{0.5f, 1.5f}, {2, 1});
  Tensor m = cat({a, f, b.t().slice(0, 0, 1).t()}, 1);
  CHECK(m.dtype() == DType::Float32);
  CHECK(values(m) == std::vector<double>{0, 1, 2, 0.5, 6, 3, 4, 5, 1.5, 9});
  CHECK(cat({zeros({2, 3}), empty({0}), ones({1, 3}, DType::Float64)}).dtype() == DType::Float64);

  // Legacy [0] tensors are skipped whatever the other shapes; empty slices along dim are fine.
  Tensor e = cat({empty({0}), a, empty({0}), b.slice(0, 0, 0)}, 0);
  CHECK(e.sizes() == Shape{2, 3});
  CHECK(values(e) == values(a));
  CHECK(cat({empty({0}), empty({0})}).sizes() == Shape{0});

  // Higher rank along a middle dim, against a reference built by index arithmetic.
  Tensor x = seq({2, 3, 4}), y = seq({2, 1, 4}, 0.9);
  Tensor z = cat({x, y}, 1);
  auto X = values(x), Y = values(y), Z = values(z);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 4; ++k)
        CHECK(Z[size_t((i * 4 + j) * 4 + k)] == (j < 3 ? X[size_t((i * 3 + j) * 4 + k)] : Y[size_t(i * 4 + k)]));
  // Large enough to take the parallel path.
  Tensor big = rand({300, 200}), big2 = rand({300, 100});
  Tensor bc = cat({big, big2}, 1);
  check_close(bc.slice(1, 0, 200), big, 0, 0);
  check_close(bc.slice(1, 200, 300), big2, 0, 0);

  check_error([&] { cat({a, zeros({3, 3})}, 1); }, "cat: shapes [2,3] and [3,3] (tensor 1) must match except in dimension 1");
  check_error([&] { cat({a, zeros({2})}); }, "cat: tensors must have the same number of dimensions, got shapes [2,3] and [2]");
  check_error([&] { cat({a, scalar_tensor(1)}); }, "cat: zero-dimensional tensor (at position 1) cannot be concatenated");
  check_error([&] { cat({a, b}, 2); }, "cat: dim 2 is out of range for a tensor of rank 2");
  check_error([&] { cat({}); }, "cat: expected a non-empty list of tensors");
}

TEST_CASE("nn ops: index_select") {
  Tensor x = seq({5, 4});
  auto X = values(x);
  Tensor idx = tensor(std::vector<int64_t>{4, 0, 4, 2});
  Tensor r0 = index_select(x, 0, idx);
  CHECK(r0.sizes() == Shape{4, 4});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) CHECK(values(r0)[size_t(i * 4 + j)] == X[size_t(values(idx)[size_t(i)] * 4 + j)]);
  Tensor r1 = index_select(x, -1, tensor(std::vector<int64_t>{3, 1}).to(DType::Int32));
  CHECK(r1.sizes() == Shape{5, 2});
  for (int i = 0; i < 5; ++i) {
    CHECK(values(r1)[size_t(i * 2)] == X[size_t(i * 4 + 3)]);
    CHECK(values(r1)[size_t(i * 2 + 1)] == X[size_t(i * 4 + 1)]);
  }
  // 0-d index keeps the dim (size 1); a transposed input; an int dtype; a 0-d input.
  CHECK(index_select(x, 0, scalar_tensor(2, DType::Int64)).sizes() == Shape{1, 4});
  Tensor xt = x.t();
  check_close(index_select(xt, 1, idx), index_select(x, 0, idx).t(), 0, 0);
  CHECK(values(index_select(arange(10).reshape({2, 5}), 1, tensor(std::vector<int64_t>{4, 4}))) ==
        std::vector<double>{4, 4, 9, 9});
  Tensor s = index_select(scalar_tensor(5.0), 0, tensor(std::vector<int64_t>{0}));
  CHECK(s.dim() == 0);
  CHECK(s.item<double>() == 5.0);
  // Middle dim of a 3-D tensor, and an empty index.
  Tensor y = seq({2, 3, 4});
  check_close(index_select(y, 1, tensor(std::vector<int64_t>{2, 0})),
              cat({y.slice(1, 2, 3), y.slice(1, 0, 1)}, 1), 0, 0);
  CHECK(index_select(y, 1, empty({0}, DType::Int64)).sizes() == Shape{2, 0, 4});

  check_error([&] { index_select(x, 0, tensor(std::vector<int64_t>{1, 7})); },
              "index_select: index 7 is out of bounds for dimension 0 with size 5");
  check_error([&] { index_select(x, 1, tensor(std::vector<int64_t>{-1})); },
              "index_select: index -1 is out of bounds for dimension 1 with size 4");
  check_error([&] { index_select(x, 0, tensor(std::vector<float>{1.f})); },
              "index_select: expected index of dtype int64 or int32, got float32");
  check_error([&] { index_select(x, 0, zeros({2, 2}, DType::Int64)); }, "index_select: index must be 1-D or 0-d, got shape [2,2]");
  check_error([&] { index_select(x, 2, idx); }, "index_select: dim 2 is out of range for a tensor of rank 2");
}

TEST_CASE("nn ops: gather") {
  Tensor x = seq({3, 4});
  auto X = values(x);
  Tensor i1 = tensor(std::vector<int64_t>{3, 0, 1, 1, 2, 2}, {3, 2});
  Tensor g1 = gather(x, 1, i1);
  CHECK(g1.sizes() == Shape{3, 2});
  auto I1 = values(i1);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 2; ++c) CHECK(values(g1)[size_t(r * 2 + c)] == X[size_t(r * 4 + int(I1[size_t(r * 2 + c)]))]);
  // dim 0, index smaller than the input in the other dim, input read through transposed strides.
  Tensor i0 = tensor(std::vector<int64_t>{2, 0, 1, 1, 0, 2}, {2, 3});
  Tensor g0 = gather(x, 0, i0);
  auto I0 = values(i0);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) CHECK(values(g0)[size_t(r * 3 + c)] == X[size_t(int(I0[size_t(r * 3 + c)]) * 4 + c)]);
  Tensor xt = x.t().contiguous().t();  // same values, column-major
  check_close(gather(xt, 0, i0), g0, 0, 0);
  check_close(gather(xt, 1, i1), g1, 0, 0);
  // 3-D over the middle dim.
  Tensor y = seq({2, 3, 2});
  Tensor iy = tensor(std::vector<int64_t>{2, 1, 0, 0, 1, 2, 2, 2}, {2, 2, 2});
  auto Y = values(y), IY = values(iy), GY = values(gather(y, 1, iy));
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 2; ++c)
        CHECK(GY[size_t((a * 2 + b) * 2 + c)] == Y[size_t((a * 3 + int(IY[size_t((a * 2 + b) * 2 + c)])) * 2 + c)]);
  CHECK(gather(scalar_tensor(5.0), 0, scalar_tensor(0, DType::Int64)).item<double>() == 5.0);

  check_error([&] { gather(x, 1, tensor(std::vector<int64_t>{0, 4, 0}, {3, 1})); },
              "gather: index 4 is out of bounds for dimension 1 with size 4");
  check_error([&] { gather(x, 1, tensor(std::vector<int64_t>{0, 1})); },
              "gather: index shape [2] must have the same rank as input shape [3,4]");
  check_error([&] { gather(x, 1, zeros({4, 1}, DType::Int64)); },
              "gather: index shape [4,1] is larger than input shape [3,4] in dimension 0");
  check_error([&] { gather(x, 1, zeros({3, 1}, DType::Int32)); }, "gather: expected index of dtype int64, got int32");
}

// torch.scatter_add as a direct loop over index positions, for [A,B,C] tensors.
Tensor ref_scatter_add3(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = self.contiguous().clone();
  auto O = values(out), S = values(src.contiguous()), I = values(index.contiguous());
  const Shape &is = index.sizes(), &ss = src.sizes(), &os = out.sizes();
  for (int64_t a = 0; a < is[0]; ++a)
    for (int64_t b = 0; b < is[1]; ++b)
      for (int64_t c = 0; c < is[2]; ++c) {
        int64_t pos[3] = {a, b, c};
        pos[dim] = int64_t(I[size_t((a * is[1] + b) * is[2] + c)]);
        O[size_t((pos[0] * os[1] + pos[1]) * os[2] + pos[2])] += S[size_t((a * ss[1] + b) * ss[2] + c)];
      }
  return tensor(O, os);
}

TEST_CASE("nn ops: scatter_add") {
  Tensor self = seq({2, 5, 3}, 0.3), src = seq({2, 4, 3}, 0.7);
  // Repeated targets accumulate; every dim, with index as large as self elsewhere (the dense path)
  // and smaller (the general one).
  Tensor i1 = tensor(std::vector<int64_t>{4, 0, 0, 1, 4, 4, 2, 2, 3, 0, 1, 2, 3, 3, 3, 4, 0, 1, 1, 1, 2, 0, 0, 4},
                     {2, 4, 3});
  check_close(scatter_add(self, 1, i1, src), ref_scatter_add3(self, 1, i1, src), 1e-5, 1e-5);
  Tensor i2 = tensor(std::vector<int64_t>{2, 0, 2, 1, 1, 1, 0, 2, 0, 2, 2, 2, 0, 0, 1, 1, 0, 1, 2, 2, 0, 0, 1, 0,
                                          1, 1, 1, 2, 2, 2},
                     {2, 5, 3});
  Tensor src2 = seq({2, 5, 3}, 0.9);
  check_close(scatter_add(self, 2, i2, src2), ref_scatter_add3(self, 2, i2, src2), 1e-5, 1e-5);
  Tensor i0 = tensor(std::vector<int64_t>{1, 0, 1, 1, 1, 0}, {1, 2, 3});
  check_close(scatter_add(self, 0, i0, src), ref_scatter_add3(self, 0, i0, src), 1e-5, 1e-5);
  // Non-contiguous src and index take the general loop and agree with the dense one.
  Tensor src_t = src.transpose(0, 2).contiguous().transpose(0, 2), i1_t = i1.transpose(0, 2).contiguous().transpose(0, 2);
  REQUIRE(!src_t.is_contiguous());
  check_close(scatter_add(self, 1, i1_t, src_t), scatter_add(self, 1, i1, src), 0, 0);
  // self is not written.
  check_close(self, seq({2, 5, 3}, 0.3), 0, 0);
  check_error([&] { scatter_add(self, 1, full_like(i1, 5), src); },
              "scatter_add: index 5 is out of bounds for dimension 1 with size 5");
  Tensor neg_t = full_like(i1, -1).transpose(0, 2).contiguous().transpose(0, 2);
  check_error([&] { scatter_add(self, 1, neg_t, src_t); },
              "scatter_add: index -1 is out of bounds for dimension 1 with size 5");
}

TEST_CASE("nn ops: scatter_add into fresh zeros (the JIT's scatter-into-zeros groups) equals scatter_add of zeros") {
  Tensor src = seq({2, 4, 3}, 0.7), src2 = seq({2, 5, 3}, 0.9);
  Tensor i1 = tensor(std::vector<int64_t>{4, 0, 0, 1, 4, 4, 2, 2, 3, 0, 1, 2, 3, 3, 3, 4, 0, 1, 1, 1, 2, 0, 0, 4},
                     {2, 4, 3});
  Tensor i2 = tensor(std::vector<int64_t>{2, 0, 2, 1, 1, 1, 0, 2, 0, 2, 2, 2, 0, 0, 1, 1, 0, 1, 2, 2, 0, 0, 1, 0,
                                          1, 1, 1, 2, 2, 2},
                     {2, 5, 3});
  Tensor i0 = tensor(std::vector<int64_t>{1, 0, 1, 1, 1, 0}, {1, 2, 3});
  Tensor src_t = src.transpose(0, 2).contiguous().transpose(0, 2);
  struct Case {
    int64_t dim;
    Tensor index, src;
  };
  // Dense rows along dims 1 and 2, the general loop along dim 0 and for a strided src.
  for (const Case& c : {Case{1, i1, src}, Case{2, i2, src2}, Case{0, i0, src}, Case{1, i1, src_t}}) {
    CAPTURE(c.dim);
    for (DType dt : {DType::Float64, DType::Float32}) {
      Tensor s = c.src.to(dt), z = zeros({2, 5, 3}, {dt});
      std::optional<Tensor> got = cpu::scatter_add_into_zeros({2, 5, 3}, dt, c.index, s, c.dim);
      REQUIRE(got.has_value());
      check_close(*got, scatter_add(z, c.dim, c.index, s), 0, 0);
    }
  }
  CHECK_FALSE(cpu::scatter_add_into_zeros({2, 5, 3}, DType::Int64, i1, i1, 1).has_value());
  check_error([&] { cpu::scatter_add_into_zeros({2, 5, 3}, DType::Float64, full_like(i1, 5), src, 1); },
              "scatter_add: index 5 is out of bounds for dimension 1 with size 5");
}

TEST_CASE("nn ops: softmax and log_softmax") {
  Tensor x = seq({3, 5}, 0.9, 0.2) * 10.0;
  auto ref = ref_log_softmax_rows(values(x), 3, 5);
  check_close(log_softmax(x, 1), f64(ref, {3, 5}), 1e-12, 1e-12);
  std::vector<double> sm;
  for (double v : ref) sm.push_back(std::exp(v));
  check_close(softmax(x, -1), f64(sm, {3, 5}), 1e-12, 1e-12);
  check_close(x.softmax(1), f64(sm, {3, 5}), 1e-12, 1e-12);
  // Along dim 0 is the same computation on the transpose.
  check_close(softmax(x.t(), 0), f64(sm, {3, 5}).t(), 1e-12, 1e-12);
  // Huge logits stay finite: the max is subtracted before exp.
  Tensor big = tensor(std::vector<float>{1000.f, 1001.f, 1002.f});
  check_close(softmax(big, 0), tensor(std::vector<float>{0.09003057f, 0.24472847f, 0.66524096f}), 1e-5, 1e-7);
  check_close(log_softmax(big, 0), tensor(std::vector<float>{-2.40760596f, -1.40760596f, -0.40760596f}), 1e-5, 1e-6);
  // torch.log_softmax(x * 10, 1)
  check_close(log_softmax(seq({2, 3}) * 10.0, 1),
              f64({-5.523172548502805, -2.6273232918845806, -0.07932984259417587, -2.224632536175998,
                   -1.003760530083032, -0.6436063538399108},
                  {2, 3}),
              1e-12, 1e-12);
  CHECK(softmax(scalar_tensor(3.0), 0).item<double>() == 1.0);
  check_error([&] { softmax(x, 2); }, "softmax: dim 2 is out of range for a tensor of rank 2");
}

TEST_CASE("nn ops: nll_loss and cross_entropy") {
  Tensor logits = seq({3, 4}) * 3.0;
  Tensor target = tensor(std::vector<int64_t>{2, 0, 3});
  auto lsm = ref_log_softmax_rows(values(logits), 3, 4);
  std::vector<double> per = {-lsm[2], -lsm[4], -lsm[11]};
  check_close(cross_entropy(logits, target, "none"), f64(per, {3}), 1e-12, 1e-12);
  check_close(cross_entropy(logits, target, "sum"), scalar_tensor(per[0] + per[1] + per[2], DType::Float64), 1e-12, 1e-12);
  check_close(nll_loss(log_softmax(logits, 1), target), scalar_tensor((per[0] + per[1] + per[2]) / 3, DType::Float64),
              1e-12, 1e-12);
  // torch.nn.functional.cross_entropy values
  check_close(cross_entropy(logits, target), scalar_tensor(1.8844699352152585, DType::Float64), 1e-12, 1e-12);
  check_close(cross_entropy(logits, target, "none"),
              f64({1.2436048707688467, 1.3060765274635042, 3.1037284074134246}, {3}), 1e-12, 1e-12);
  // ignore_index=-100 (torch's default): dropped from the sum and from the mean's count.
  check_close(cross_entropy(logits, tensor(std::vector<int64_t>{2, -100, 3})),
              scalar_tensor(2.1736666390911354, DType::Float64), 1e-12, 1e-12);
  CHECK(std::isnan(nll_loss(zeros({2, 3}), tensor(std::vector<int64_t>{-100, -100})).item<double>()));
  // K-dimensional: [N, C, d] logits with [N, d] targets.
  check_close(cross_entropy(seq({2, 3, 2}) * 2.0, tensor(std::vector<int64_t>{0, 2, 1, 1}, {2, 2})),
              scalar_tensor(1.3819067010924817, DType::Float64), 1e-12, 1e-12);
  // Class probabilities as the target.
  check_close(cross_entropy(logits, softmax(seq({3, 4}, 0.5, 0.2), 1)), scalar_tensor(1.5755988998996717, DType::Float64),
              1e-12, 1e-12);
  // One unbatched sample: [C] input, 0-d target.
  Tensor one = nll_loss(f64({-1.0, -2.0, -3.0}, {3}), scalar_tensor(1, DType::Int64));
  CHECK(one.dim() == 0);
  CHECK(one.item<double>() == 2.0);
  // float32 stays float32.
  CHECK(cross_entropy(logits.to(DType::Float32), target).dtype() == DType::Float32);

  check_error([&] { nll_loss(logits, tensor(std::vector<int64_t>{2, 4, 0})); }, "nll_loss: target 4 is out of bounds for 4 classes");
  check_error([&] { nll_loss(logits, tensor(std::vector<int64_t>{2, -1, 0})); }, "nll_loss: target -1 is out of bounds for 4 classes");
  check_error([&] { nll_loss(logits, tensor(std::vector<int64_t>{2, 0})); },
              "nll_loss: expected target of shape [3] for input of shape [3,4], got [2]");
  check_error([&] { nll_loss(logits, tensor(std::vector<int64_t>{1, 2, 0}).to(DType::Int32)); },
              "nll_loss: expected target of dtype int64, got int32");
  check_error([&] { cross_entropy(logits, target, "avg"); }, "cross_entropy: reduction must be 'mean', 'sum' or 'none', got 'avg'");
  check_error([&] { cross_entropy(logits, zeros({3, 3})); },
              "cross_entropy: class-probability target of shape [3,3] must match input shape [3,4]");
}

TEST_CASE("nn ops: mse_loss") {
  Tensor a = seq({2, 3}), b = seq({2, 3}, 0.8, 1.0);
  auto A = values(a), B = values(b);
  std::vector<double> sq;
  double s = 0;
  for (size_t i = 0; i < A.size(); ++i) {
    sq.push_back((A[i] - B[i]) * (A[i] - B[i]));
    s += sq.back();
  }
  check_close(mse_loss(a, b, "none"), f64(sq, {2, 3}), 1e-12, 1e-12);
  check_close(mse_loss(a, b, "sum"), scalar_tensor(s, DType::Float64), 1e-12, 1e-12);
  check_close(mse_loss(a, b), scalar_tensor(s / 6, DType::Float64), 1e-12, 1e-12);
  check_error([&] { mse_loss(a, b, "total"); }, "mse_loss: reduction must be 'mean', 'sum' or 'none', got 'total'");
}

TEST_CASE("nn ops: embedding") {
  Tensor w = seq({6, 3});
  Tensor idx = tensor(std::vector<int64_t>{5, 0, 2, 2}, {2, 2});
  Tensor e = embedding(w, idx);
  CHECK(e.sizes() == Shape{2, 2, 3});
  auto W = values(w), E = values(e), I = values(idx);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(E[size_t(i * 3 + j)] == W[size_t(int(I[size_t(i)]) * 3 + j)]);
  CHECK(embedding(w, scalar_tensor(1, DType::Int64)).sizes() == Shape{3});
  check_error([&] { embedding(w, tensor(std::vector<int64_t>{6})); }, "index_select: index 6 is out of bounds for dimension 0 with size 6");
  check_error([&] { embedding(w, tensor(std::vector<float>{1.f})); }, "embedding: expected indices of dtype int64 or int32, got float32");
  check_error([&] { embedding(seq({6}), idx); }, "embedding: weight must be 2-D, got shape [6]");
}

TEST_CASE("nn ops: layer_norm") {
  Tensor x = seq({2, 3, 4});
  Tensor w = seq({3, 4}, 0.9, 0.3), b = seq({3, 4}, 0.2, 0.5);
  // Reference over the trailing [3,4] block of each sample, biased variance.
  auto X = values(x), W = values(w), B = values(b);
  std::vector<double> ref(X.size()), ref_nw(X.size());
  for (int n = 0; n < 2; ++n) {
    double m = 0, v = 0;
    for (int i = 0; i < 12; ++i) m += X[size_t(n * 12 + i)];
    m /= 12;
    for (int i = 0; i < 12; ++i) v += (X[size_t(n * 12 + i)] - m) * (X[size_t(n * 12 + i)] - m);
    v /= 12;
    for (int i = 0; i < 12; ++i) {
      double h = (X[size_t(n * 12 + i)] - m) / std::sqrt(v + 1e-5);
      ref_nw[size_t(n * 12 + i)] = h;
      ref[size_t(n * 12 + i)] = h * W[size_t(i)] + B[size_t(i)];
    }
  }
  check_close(layer_norm(x, {3, 4}, w, b), f64(ref, {2, 3, 4}), 1e-12, 1e-12);
  check_close(layer_norm(x, {3, 4}), f64(ref_nw, {2, 3, 4}), 1e-12, 1e-12);
  // torch.nn.functional.layer_norm(x, [3, 4], w, b): first and last values
  auto t = values(layer_norm(x, {3, 4}, w, b));
  CHECK(t[0] == doctest::Approx(0.154342740953524).epsilon(1e-12));
  CHECK(t[23] == doctest::Approx(-0.9900921480267045).epsilon(1e-12));
  // Over the last dim only, float32.
  Tensor y = layer_norm(x.to(DType::Float32), {4});
  CHECK(y.dtype() == DType::Float32);
  auto Y = values(y);
  for (int r = 0; r < 6; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 4; ++i) m += X[size_t(r * 4 + i)] / 4;
    for (int i = 0; i < 4; ++i) v += (X[size_t(r * 4 + i)] - m) * (X[size_t(r * 4 + i)] - m) / 4;
    for (int i = 0; i < 4; ++i) CHECK(Y[size_t(r * 4 + i)] == doctest::Approx((X[size_t(r * 4 + i)] - m) / std::sqrt(v + 1e-5)).epsilon(1e-5));
  }
  check_error([&] { layer_norm(x, {3}); }, "layer_norm: normalized_shape [3] does not match the trailing dims of input shape [2,3,4]");
  check_error([&] { layer_norm(x, {4}, zeros({3})); }, "layer_norm: weight of shape [3] must have normalized_shape [4]");
  check_error([&] { layer_norm(x, {4}, {}, zeros({5})); }, "layer_norm: bias of shape [5] must have normalized_shape [4]");
}

TEST_CASE("nn ops: batch_norm") {
  Tensor x = seq({4, 3, 2});
  Tensor w = f64({1.5, -0.5, 2.0}, {3}), b = f64({0.1, 0.2, 0.3}, {3});
  Tensor rm = zeros({3}, DType::Float64), rv = ones({3}, DType::Float64);
  uint64_t v0 = rm.version();
  Tensor y = batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
  CHECK(rm.version() > v0);
  // torch.nn.functional.batch_norm(x, rm, rv, w, b, training=True): output and updated running stats
  check_close(y,
              f64({0.3965120823125297, 1.0756927056438255, -0.24876072958750484, -0.39911037548799727,
                   2.6268637187281736, 2.7259894882569253, 2.3817803415377545, 2.0585812257937377,
                   -0.2138927385505755, -0.013060987302221536, 0.08929127108013493, -0.7284813798738939,
                   -1.0802891068922746, -1.6126066980235827, 0.9405888439064226, 0.9996797006779011,
                   -2.729170740717066, -2.45669719168687, -1.492378504805015, -0.9272920455669748,
                   0.38111958523185374, 0.15343670111212168, 1.0891226527174034, 1.7830821814951925},
                  {4, 3, 2}),
              1e-10, 1e-10);
  check_close(rm, f64({-0.0026591611342261, 0.005545984081261581, 0.011813757498200716}, {3}), 1e-12, 1e-14);
  check_close(rv, f64({0.9467460775177299, 0.949177402753844, 0.9603458598828519}, {3}), 1e-12, 1e-14);
  // Evaluation uses the (now updated) running statistics.
  check_close(batch_norm(x, rm, rv, w, b, false),
              f64({0.2580027422057604, 0.7044273843272805, -0.12777188313755064, -0.2290039942208284,
                   2.2423802037262237, 2.3158827451336434, 1.5629172843680177, 1.3504788775237246,
                   -0.10429487179668387, 0.03092740977009955, 0.3607501816412421, -0.24563470116331287,
                   -0.7126969799707975, -1.0625887200357467, 0.6730305891241545, 0.712817128965129,
                   -1.7291616718780698, -1.5271203821586556, -0.9835628669905618, -0.612132187629137,
                   0.29633363182432015, 0.14303217987261801, 1.1021330518939103, 1.6167095262209779},
                  {4, 3, 2}),
              1e-10, 1e-10);

  // Reference for [N,C,H,W] training without affine parameters or running stats.
  Tensor x4 = seq({3, 2, 2, 3}, 0.71);
  auto X = values(x4);
  std::vector<double> ref(X.size());
  for (int c = 0; c < 2; ++c) {
    double m = 0, v = 0;
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 6; ++i) m += X[size_t((n * 2 + c) * 6 + i)] / 18;
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 6; ++i) v += std::pow(X[size_t((n * 2 + c) * 6 + i)] - m, 2) / 18;
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 6; ++i) ref[size_t((n * 2 + c) * 6 + i)] = (X[size_t((n * 2 + c) * 6 + i)] - m) / std::sqrt(v + 1e-5);
  }
  check_close(batch_norm(x4, {}, {}, {}, {}, true), f64(ref, {3, 2, 2, 3}), 1e-12, 1e-12);

  check_error([&] { batch_norm(zeros({1, 3}), zeros({3}), ones({3}), {}, {}, true); },
              "batch_norm: expected more than 1 value per channel when training, got input shape [1,3]");
  check_error([&] { batch_norm(x, zeros({4}, DType::Float64), rv); },
              "batch_norm: running_mean should contain 3 elements, got 4 (input shape [4,3,2])");
  check_error([&] { batch_norm(x, {}, {}, {}, {}, false); },
              "batch_norm: running_mean and running_var must be defined in evaluation mode");
  check_error([&] { batch_norm(zeros({3}), {}, {}, {}, {}, true); },
              "batch_norm: expected input with at least 2 dims [N,C,...], got shape [3]");
}

TEST_CASE("nn ops: dropout") {
  Tensor x = ones({200, 100});
  CHECK(dropout(x, 0.5, false).is_same(x));
  CHECK(dropout(x, 0.0, true).is_same(x));
  CHECK(values(dropout(x, 1.0)) == std::vector<double>(20000, 0.0));
  manual_seed(7);
  Tensor y = dropout(x, 0.25);
  CHECK(y.dtype() == DType::Float32);
  int64_t kept = 0;
  for (double v : values(y)) {
    CHECK_MESSAGE((v == 0.0 || std::fabs(v - 1.0 / 0.75) < 1e-6), "value " << v);
    kept += v != 0.0;
  }
  // 20000 Bernoulli(0.75) draws: 15000 +- 6 sigma (sigma ~ 61).
  CHECK(kept > 15000 - 370);
  CHECK(kept < 15000 + 370);
  // The same seed gives the same mask.
  manual_seed(7);
  check_close(dropout(x, 0.25), y, 0, 0);
  Tensor xd = seq({1000}, 0.1, 0.0);
  Tensor yd = dropout(xd, 0.5);
  CHECK(yd.dtype() == DType::Float64);
  auto XD = values(xd), YD = values(yd);
  for (size_t i = 0; i < XD.size(); ++i) CHECK((YD[i] == 0.0 || YD[i] == XD[i] * 2.0));
  check_error([&] { dropout(x, 1.5); }, "dropout: probability has to be between 0 and 1, but got 1.5");
  check_error([&] { dropout(x, -0.1); }, "dropout: probability has to be between 0 and 1, but got -0.1");
}

}  // namespace kiln
