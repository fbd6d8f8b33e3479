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

// The tap (ki, kj) that reads the one input pixel, when the conv is one taken here.
struct Tap {
  int64_t ki, kj;
};
std::optional<Tap> tap(const Shape& input_shape, const Shape& weight_shape, const Attrs& attrs) {
  if (input_shape.size() != 4 || weight_shape.size() != 4 || attrs.i_or("groups", 1) != 1 || input_shape[2] != 1 ||
      input_shape[3] != 1 || weight_shape[1] != input_shape[1] || input_shape[0] == 0 || input_shape[1] == 0 ||
      weight_shape[0] == 0)
    return std::nullopt;
  const Shape &st = attrs.ints("stride"), &pd = attrs.ints("padding"), &dl = attrs.ints("dilation");
  if (st.size() != 2 || pd.size() != 2 || dl.size() != 2 || st[0] <= 0 || st[1] <= 0 || dl[0] <= 0 || dl[1] <= 0)
    return std::nullopt;
  // one output pixel: the padded input holds exactly one window, (1 + 2p - d(k-1) - 1) / s + 1 == 1
  for (int d = 0; d < 2; ++d) {
    int64_t span = 1 + 2 * pd[d] - dl[d] * (weight_shape[2 + d] - 1);
    if (span < 1 || (span - 1) / st[d] != 0) return std::nullopt;
    if (pd[d] % dl[d] != 0 || pd[d] / dl[d] >= weight_shape[2 + d]) return std::nullopt;  // no tap on the pixel
  }
  return Tap{pd[0] / dl[0], pd[1] / dl[1]};
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

template <class T>
void gather_tap(const T* src, float* dst, int64_t O, int64_t C, int64_t kk, int64_t off) {
#pragma omp parallel for if (O * C > kParallelGrain)
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c) dst[o * C + c] = float(src[(o * C + c) * kk + off]);
}

void gather_tap(const Tensor& wc, float* dst, int64_t O, int64_t C, int64_t kk, int64_t off) {
  if (wc.dtype() == DType::BFloat16) gather_tap(static_cast<const BFloat16*>(wc.raw_data()), dst, O, C, kk, off);
  else gather_tap(static_cast<const float*>(wc.raw_data()), dst, O, C, kk, off);
}

// The weight gradient [O, C, kh, kw]: zero but at the tap, which holds S[O, C].
template <class T>
void scatter_tap(const float* S, T* dW, int64_t O, int64_t C, int64_t kk, int64_t off) {
#pragma omp parallel for if (O * C * kk > kParallelGrain)
  for (int64_t o = 0; o < O; ++o) {
    T* row = dW + o * C * kk;
    std::fill(row, row + C * kk, T(0.0f));
    for (int64_t c = 0; c < C; ++c) row[c * kk + off] = T(S[o * C + c]);
  }
}

// A parameter's tap slice, kept while the parameter is unchanged (derived_copy.h). The gather reads the
// whole weight (one float in every 36 bytes of a 3x3's) and so runs at memory speed on any number of
// threads: ResNet-18's layer4 paid ~0.4 ms a conv for it in the forward and again in the backward, and an
// eval forward 1.2 ms.
struct TapCache {
  std::mutex mu;
  std::map<std::tuple<const Storage*, int64_t, int64_t>, DerivedCopy> map;
};

TapCache& tap_cache() {
  static TapCache* c = new TapCache;
  return *c;
}

// w[:, :, ki, kj] as a dense [O, C] matrix, held by the returned pointer.
std::shared_ptr<const float> tap_slice(const Tensor& w, Tap t) {
  Tensor wc = w.contiguous();
  int64_t O = w.size(0), C = w.size(1), kk = w.size(2) * w.size(3), off = t.ki * w.size(3) + t.kj;
  const std::shared_ptr<Storage>& st = w.storage();
  if (!keeps_derived_copies(st) || !w.is_contiguous()) {
    Tensor s = Tensor::empty({O, C}, DType::Float32);
    gather_tap(wc, static_cast<float*>(s.raw_data()), O, C, kk, off);
    return std::shared_ptr<const float>(static_cast<const float*>(s.raw_data()), [s](const float*) {});
  }
  TapCache& c = tap_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto key = std::make_tuple(static_cast<const Storage*>(st.get()), w.storage_offset(), off);
  auto it = c.map.find(key);
  if (it == c.map.end()) {
    for (auto e = c.map.begin(); e != c.map.end();)  // drop the slices of parameters that are gone
      e = e->second.expired() ? c.map.erase(e) : std::next(e);
    it = c.map.emplace(key, DerivedCopy{}).first;
  }
  DerivedCopy& e = it->second;
  uint64_t version = w.version();
  if (!e.current(st, version)) {
    e.renew(st, version, size_t(O * C) * sizeof(float));
    gather_tap(wc, static_cast<float*>(e.buf.get()), O, C, kk, off);
  }
  return std::static_pointer_cast<const float>(e.buf);
}

}  // namespace

std::optional<Tensor> one_pixel_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Attrs& attrs) {
  const DType d = one_pixel_dtype(x);
  if (!taken(x, d) || !taken(w, d) || (b.defined() && (!taken(b, d) || b.dim() != 1 || b.size(0) != w.size(0))))
    return std::nullopt;
  std::optional<Tap> t = tap(x.sizes(), w.sizes(), attrs);
  if (!t) return std::nullopt;
  int64_t N = x.size(0), C = x.size(1), O = w.size(0);
  Tensor xc = as_f32(x);
  std::shared_ptr<const float> ws = tap_slice(w, *t);
  Tensor y = Tensor::empty({N, O, 1, 1}, DType::Float32);
  float* Y = static_cast<float*>(y.raw_data());
  if (b.defined()) {
    Tensor bc = as_f32(b);
    const float* B = static_cast<const float*>(bc.raw_data());
    for (int64_t n = 0; n < N; ++n) std::copy(B, B + O, Y + n * O);
  }
  // Y[N, O] (+)= X[N, C] · Ws[O, C]^T
  im2col::gemm(false, true, static_cast<const float*>(xc.raw_data()), ws.get(), Y, N,
               O, C, C, C, O, b.defined());
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
  std::optional<Tap> t = tap(input_shape, weight_shape, attrs);
  int64_t N = input_shape.size() == 4 ? input_shape[0] : 0, C = N ? input_shape[1] : 0, O = N ? weight_shape[0] : 0;
  if (!t || grad.sizes() != Shape{N, O, 1, 1}) return std::nullopt;
  Tensor gc = as_f32(grad);
  const float* G = static_cast<const float*>(gc.raw_data());  // [N, O]
  ConvGrads r;
  if (need_input) {
    std::shared_ptr<const float> ws = tap_slice(w, *t);
    r.input = Tensor::empty(input_shape, DType::Float32);
    // dX[N, C] = G[N, O] · Ws[O, C]
    im2col::gemm(false, false, G, ws.get(), static_cast<float*>(r.input.raw_data()), N,
                 C, O, O, C, C);
    r.input = as_dtype(r.input, d);
  }
  if (need_weight) {
    Tensor xc = as_f32(x), gw = Tensor::empty({O, C}, DType::Float32);
    // dWs[O, C] = G[N, O]^T · X[N, C]; every other tap reads only padding
    im2col::gemm(true, false, G, static_cast<const float*>(xc.raw_data()), static_cast<float*>(gw.raw_data()), O, C, N,
                 O, C, C);
    r.weight = Tensor::empty(weight_shape, d);
    const float* S = static_cast<const float*>(gw.raw_data());
    int64_t kk = weight_shape[2] * weight_shape[3], off = t->ki * weight_shape[3] + t->kj;
    if (d == DType::BFloat16) scatter_tap(S, static_cast<BFloat16*>(r.weight.raw_data()), O, C, kk, off);
    else scatter_tap(S, static_cast<float*>(r.weight.raw_data()), O, C, kk, off);
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
