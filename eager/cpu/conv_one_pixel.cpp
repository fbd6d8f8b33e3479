#include "eager/cpu/conv_one_pixel.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <tuple>
#include <vector>

#include "core/storage.h"
#include "eager/cpu/copy.h"
#include "eager/cpu/derived_copy.h"

#include "eager/cpu/im2col.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

// Which tap of the kernel reads each input pixel when the output is one pixel, when the conv is one taken here.
// An input larger than one pixel (ResNet-18's 256 -> 512 stride-2 convs on 2x2 maps) makes the conv one GEMM
// over the pixels some tap reads, as a one-pixel input makes it one over the channels.
struct Taps {
  std::vector<int64_t> pixel;  // the input pixels (h * W + w) some tap reads, in order
  std::vector<int64_t> off;    // the tap (ki * kw + kj) reading each of them
};
std::optional<Taps> taps(const Shape& input_shape, const Shape& weight_shape, const Attrs& attrs) {
  if (input_shape.size() != 4 || weight_shape.size() != 4 || attrs.i_or("groups", 1) != 1 ||
      weight_shape[1] != input_shape[1] || input_shape[0] == 0 || input_shape[1] == 0 || weight_shape[0] == 0)
    return std::nullopt;
  const Shape &st = attrs.ints("stride"), &pd = attrs.ints("padding"), &dl = attrs.ints("dilation");
  if (st.size() != 2 || pd.size() != 2 || dl.size() != 2 || st[0] <= 0 || st[1] <= 0 || dl[0] <= 0 || dl[1] <= 0)
    return std::nullopt;
  // per dim, the tap reading each input coordinate (-1: none) of the one window,
  // (in + 2p - d(k-1) - 1) / s + 1 == 1
  std::vector<int64_t> tap[2];
  for (int d = 0; d < 2; ++d) {
    int64_t in = input_shape[2 + d], k = weight_shape[2 + d];
    int64_t span = in + 2 * pd[d] - dl[d] * (k - 1);
    if (in < 1 || span < 1 || (span - 1) / st[d] != 0) return std::nullopt;
    for (int64_t i = 0; i < in; ++i) {
      int64_t j = i + pd[d];
      tap[d].push_back(j % dl[d] == 0 && j / dl[d] < k ? j / dl[d] : -1);
    }
  }
  Taps t;
  for (size_t h = 0; h < tap[0].size(); ++h)
    for (size_t w = 0; w < tap[1].size(); ++w)
      if (tap[0][h] >= 0 && tap[1][w] >= 0) {
        t.pixel.push_back(int64_t(h * tap[1].size() + w));
        t.off.push_back(tap[0][h] * weight_shape[3] + tap[1][w]);
      }
  if (t.pixel.empty()) return std::nullopt;  // no tap on the input
  return t;
}

// Taken in float32 and in bf16 (autocast's dtype: ResNet-18's layer4 under bf16 autocast). bf16 computes in
// float32 on the bf16 values and rounds each result once, as oneDNN's bf16 conv accumulates in float32: there
// the weight (a fresh autocast cast every step) went through a cast to float32 and oneDNN's reorder, and the
// weight gradient through a float32 tensor and two casts, ~3.5 ms a conv per training step, where one pass
// over the bf16 weight is ~0.3 ms.
DType one_pixel_dtype(const Tensor& t) {
  return t.defined() && t.device().is_cpu() && (t.dtype() == DType::Float32 || t.dtype() == DType::BFloat16)
             ? t.dtype()
             : DType::Float64;  // not taken
}
bool taken(const Tensor& t, DType d) { return d != DType::Float64 && one_pixel_dtype(t) == d; }
Tensor as_f32(const Tensor& t) { return t.dtype() == DType::Float32 ? t.contiguous() : cast_to(t, DType::Float32); }
Tensor as_dtype(const Tensor& t, DType d) { return d == DType::Float32 ? t : cast_to(t, d); }

// Ws[O, C * V] from w[O, C, kh, kw]: Ws[o, c * V + v] = w[o, c, off[v]].
template <class T>
void gather_taps(const T* src, float* dst, int64_t O, int64_t C, int64_t kk, const std::vector<int64_t>& off) {
  const int64_t V = int64_t(off.size());
#pragma omp parallel for if (O * C * V > kParallelGrain)
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t v = 0; v < V; ++v) dst[(o * C + c) * V + v] = float(src[(o * C + c) * kk + off[v]]);
}

void gather_taps(const Tensor& wc, float* dst, int64_t O, int64_t C, int64_t kk, const std::vector<int64_t>& off) {
  if (wc.dtype() == DType::BFloat16) gather_taps(static_cast<const BFloat16*>(wc.raw_data()), dst, O, C, kk, off);
  else gather_taps(static_cast<const float*>(wc.raw_data()), dst, O, C, kk, off);
}

// The weight gradient [O, C, kh, kw] from S[O, C * V]: zero but at the taps.
template <class T>
void scatter_taps(const float* S, T* dW, int64_t O, int64_t C, int64_t kk, const std::vector<int64_t>& off) {
  const int64_t V = int64_t(off.size());
#pragma omp parallel for if (O * C * kk > kParallelGrain)
  for (int64_t o = 0; o < O; ++o) {
    T* row = dW + o * C * kk;
    std::fill(row, row + C * kk, T(0.0f));
    for (int64_t c = 0; c < C; ++c)
      for (int64_t v = 0; v < V; ++v) row[c * kk + off[v]] = T(S[(o * C + c) * V + v]);
  }
}

// x [N, C, P] (float32, contiguous) as [N, C * V] over the pixels read, and back (zero where none reads):
// the convs whose every input pixel is read need neither.
Tensor read_pixels(const Tensor& x, const Taps& t) {
  const int64_t N = x.size(0), C = x.size(1), P = x.size(2) * x.size(3), V = int64_t(t.pixel.size());
  if (V == P) return x;
  Tensor r = Tensor::empty({N, C * V}, DType::Float32);
  const float* X = static_cast<const float*>(x.raw_data());
  float* R = static_cast<float*>(r.raw_data());
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t v = 0; v < V; ++v) R[nc * V + v] = X[nc * P + t.pixel[v]];
  return r;
}
Tensor to_pixels(const Tensor& r, const Shape& shape, const Taps& t) {
  const int64_t P = shape[2] * shape[3], V = int64_t(t.pixel.size());
  Tensor x = Tensor::empty(shape, DType::Float32);
  const float* R = static_cast<const float*>(r.raw_data());
  float* X = static_cast<float*>(x.raw_data());
  std::fill(X, X + shape[0] * shape[1] * P, 0.0f);
  for (int64_t nc = 0; nc < shape[0] * shape[1]; ++nc)
    for (int64_t v = 0; v < V; ++v) X[nc * P + t.pixel[v]] = R[nc * V + v];
  return x;
}

// A parameter's tap slice, kept while the parameter is unchanged (derived_copy.h). The gather reads the
// whole weight (one float in every 36 bytes of a 3x3's) and so runs at memory speed on any number of
// threads: ResNet-18's layer4 paid ~0.4 ms a conv for it in the forward and again in the backward, and an
// eval forward 1.2 ms.
struct TapCache {
  std::mutex mu;
  std::map<std::tuple<const Storage*, int64_t, std::vector<int64_t>>, DerivedCopy> map;
};

TapCache& tap_cache() {
  static TapCache* c = new TapCache;
  return *c;
}

// w's taps t.off as a dense [O, C * V] matrix, held by the returned pointer.
std::shared_ptr<const float> tap_slice(const Tensor& w, const Taps& t) {
  Tensor wc = w.contiguous();
  int64_t O = w.size(0), C = w.size(1), kk = w.size(2) * w.size(3), V = int64_t(t.off.size());
  // Every tap, in order (one window over the whole input): a float32 weight is its own slice, and a copy of it
  // kept per parameter would double a large conv's weight (a classifier written as a conv).
  if (wc.dtype() == DType::Float32 && V == kk)
    return std::shared_ptr<const float>(static_cast<const float*>(wc.raw_data()), [wc](const float*) {});
  const std::shared_ptr<Storage>& st = w.storage();
  if (!keeps_derived_copies(st) || !w.is_contiguous()) {
    Tensor s = Tensor::empty({O, C * V}, DType::Float32);
    gather_taps(wc, static_cast<float*>(s.raw_data()), O, C, kk, t.off);
    return std::shared_ptr<const float>(static_cast<const float*>(s.raw_data()), [s](const float*) {});
  }
  TapCache& c = tap_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto key = std::make_tuple(static_cast<const Storage*>(st.get()), w.storage_offset(), t.off);
  auto it = c.map.find(key);
  if (it == c.map.end()) {
    for (auto e = c.map.begin(); e != c.map.end();)  // drop the slices of parameters that are gone
      e = e->second.expired() ? c.map.erase(e) : std::next(e);
    it = c.map.emplace(key, DerivedCopy{}).first;
  }
  DerivedCopy& e = it->second;
  uint64_t version = w.version();
  if (!e.current(st, version)) {
    e.renew(st, version, size_t(O * C * V) * sizeof(float));
    gather_taps(wc, static_cast<float*>(e.buf.get()), O, C, kk, t.off);
  }
  return std::static_pointer_cast<const float>(e.buf);
}

}  // namespace

std::optional<Tensor> one_pixel_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Attrs& attrs) {
  const DType d = one_pixel_dtype(x);
  if (!taken(x, d) || !taken(w, d) || (b.defined() && (!taken(b, d) || b.dim() != 1 || b.size(0) != w.size(0))))
    return std::nullopt;
  std::optional<Taps> t = taps(x.sizes(), w.sizes(), attrs);
  if (!t) return std::nullopt;
  int64_t N = x.size(0), K = x.size(1) * int64_t(t->pixel.size()), O = w.size(0);
  Tensor xc = read_pixels(as_f32(x), *t);
  std::shared_ptr<const float> ws = tap_slice(w, *t);
  Tensor y = Tensor::empty({N, O, 1, 1}, DType::Float32);
  float* Y = static_cast<float*>(y.raw_data());
  if (b.defined()) {
    Tensor bc = as_f32(b);
    const float* B = static_cast<const float*>(bc.raw_data());
    for (int64_t n = 0; n < N; ++n) std::copy(B, B + O, Y + n * O);
  }
  // Y[N, O] (+)= X[N, C * V] · Ws[O, C * V]^T
  im2col::gemm(false, true, static_cast<const float*>(xc.raw_data()), ws.get(), Y, N, O, K, K, K, O, b.defined());
  return as_dtype(y, d);
}

std::optional<ConvGrads> one_pixel_conv2d_backward(const Tensor& grad, const Tensor& x, const Tensor& w,
                                                   const Shape& input_shape, const Shape& weight_shape,
                                                   const Attrs& attrs, bool need_input, bool need_weight,
                                                   bool need_bias) {
  const DType d = one_pixel_dtype(grad);
  if (!taken(grad, d) || grad.dim() != 4) return std::nullopt;
  if ((need_weight && (!taken(x, d) || x.sizes() != input_shape)) ||
      (need_input && (!taken(w, d) || w.sizes() != weight_shape)))
    return std::nullopt;
  std::optional<Taps> t = taps(input_shape, weight_shape, attrs);
  if (!t) return std::nullopt;
  int64_t N = input_shape[0], C = input_shape[1], O = weight_shape[0], K = C * int64_t(t->pixel.size());
  if (grad.sizes() != Shape{N, O, 1, 1}) return std::nullopt;
  Tensor gc = as_f32(grad);
  const float* G = static_cast<const float*>(gc.raw_data());  // [N, O]
  ConvGrads r;
  if (need_input) {
    std::shared_ptr<const float> ws = tap_slice(w, *t);
    const bool all_read = K == C * input_shape[2] * input_shape[3];
    Tensor dx = Tensor::empty(all_read ? input_shape : Shape{N, K}, DType::Float32);
    // dX[N, C * V] = G[N, O] · Ws[O, C * V]
    im2col::gemm(false, false, G, ws.get(), static_cast<float*>(dx.raw_data()), N, K, O, O, K, K);
    r.input = as_dtype(all_read ? dx : to_pixels(dx, input_shape, *t), d);
  }
  if (need_weight) {
    Tensor xc = read_pixels(as_f32(x), *t), gw = Tensor::empty({O, K}, DType::Float32);
    // dWs[O, C * V] = G[N, O]^T · X[N, C * V]; every other tap reads only padding
    im2col::gemm(true, false, G, static_cast<const float*>(xc.raw_data()), static_cast<float*>(gw.raw_data()), O, K, N,
                 O, K, K);
    r.weight = Tensor::empty(weight_shape, d);
    const float* S = static_cast<const float*>(gw.raw_data());
    int64_t kk = weight_shape[2] * weight_shape[3];
    if (d == DType::BFloat16) scatter_taps(S, static_cast<BFloat16*>(r.weight.raw_data()), O, C, kk, t->off);
    else scatter_taps(S, static_cast<float*>(r.weight.raw_data()), O, C, kk, t->off);
  }
  if (need_bias) {
    r.bias = Tensor::empty({O}, DType::Float32);
    float* dB = static_cast<float*>(r.bias.raw_data());
    for (int64_t o = 0; o < O; ++o) {
      double acc = 0;  // in double, as sum over dims 0, 2, 3 is
      for (int64_t n = 0; n < N; ++n) acc += double(G[n * O + o]);
      dB[o] = float(acc);
    }
    r.bias = as_dtype(r.bias, d);
  }
  return r;
}

}  // namespace kiln::cpu
