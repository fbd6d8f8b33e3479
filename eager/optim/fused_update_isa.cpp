// The fused optimizer loops, compiled once per instruction set with the elementwise kernels (see
// eager/meson.build) and reached through cpu::isa_kernels(), so sqrt and division vectorise at the
// CPU's width.
#include <algorithm>
#include <cmath>

#include "eager/cpu/isa_kernels.h"
#include "eager/optim/fused_update.h"

namespace kiln::cpu::KILN_ISA {

namespace {
// Parameters are split into chunks of this many elements across threads; each chunk is one
// vectorised loop (restrict-qualified, branch-free: the options are template arguments).
constexpr int64_t kChunk = 1 << 14;

template <typename F>
void for_chunks(int64_t n, F body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) body(c * kChunk, std::min(n, (c + 1) * kChunk));
}

template <typename T, bool Decay, bool Momentum, bool First, bool Nesterov>
void sgd_chunk(T* __restrict p, const T* __restrict g, T* __restrict buf, int64_t n, T wd, T mom, T damp, T lr) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T d = Decay ? g[i] + p[i] * wd : g[i];
    if constexpr (Momentum) {
      T b = First ? d : buf[i] * mom + d * damp;
      buf[i] = b;
      d = Nesterov ? d + b * mom : b;
    }
    p[i] = p[i] - d * lr;
  }
}

template <typename T>
void sgd_loop(T* p, const T* g, T* buf, int64_t n, const optim::SGDStep& s) {
  const T wd = T(s.weight_decay), mom = T(s.momentum), damp = T(1 - s.dampening), lr = T(s.lr);
  using Chunk = void (*)(T*, const T*, T*, int64_t, T, T, T, T);
  static constexpr Chunk table[2][2][2][2] = {
      {{{sgd_chunk<T, 0, 0, 0, 0>, sgd_chunk<T, 0, 0, 0, 1>}, {sgd_chunk<T, 0, 0, 1, 0>, sgd_chunk<T, 0, 0, 1, 1>}},
       {{sgd_chunk<T, 0, 1, 0, 0>, sgd_chunk<T, 0, 1, 0, 1>}, {sgd_chunk<T, 0, 1, 1, 0>, sgd_chunk<T, 0, 1, 1, 1>}}},
      {{{sgd_chunk<T, 1, 0, 0, 0>, sgd_chunk<T, 1, 0, 0, 1>}, {sgd_chunk<T, 1, 0, 1, 0>, sgd_chunk<T, 1, 0, 1, 1>}},
       {{sgd_chunk<T, 1, 1, 0, 0>, sgd_chunk<T, 1, 1, 0, 1>}, {sgd_chunk<T, 1, 1, 1, 0>, sgd_chunk<T, 1, 1, 1, 1>}}}};
  Chunk f = table[s.weight_decay != 0][s.momentum != 0][s.first][s.nesterov];
  for_chunks(n, [&](int64_t b, int64_t e) { f(p + b, g + b, buf ? buf + b : nullptr, e - b, wd, mom, damp, lr); });
}

// 0: no weight decay, 1: added to the gradient (Adam), 2: decoupled, applied to the parameter (AdamW)
template <typename T, int Decay>
void adam_chunk(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, int64_t n, T b1, T b2,
                T c1, T c2, T sqrt_bc2, T eps, T step, T wd, T shrink) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T x = p[i];
    T d = Decay == 1 ? g[i] + x * wd : g[i];
    if (Decay == 2) x = x * shrink;
    T mi = m[i] * b1 + d * c1;
    T vi = v[i] * b2 + d * d * c2;
    m[i] = mi;
    v[i] = vi;
    p[i] = x - mi / (std::sqrt(vi) / sqrt_bc2 + eps) * step;
  }
}

template <typename T>
void adam_loop(T* p, const T* g, T* m, T* v, int64_t n, const optim::AdamStep& s) {
  const T b1 = T(s.beta1), b2 = T(s.beta2), c1 = T(1 - s.beta1), c2 = T(1 - s.beta2);
  const T sqrt_bc2 = T(std::sqrt(s.bias_correction2)), eps = T(s.eps), step = T(s.lr / s.bias_correction1);
  const T wd = T(s.weight_decay), shrink = T(1 - s.lr * s.weight_decay);
  auto f = s.weight_decay == 0 ? adam_chunk<T, 0> : s.decoupled ? adam_chunk<T, 2> : adam_chunk<T, 1>;
  for_chunks(n, [&](int64_t b, int64_t e) {
    f(p + b, g + b, m + b, v + b, e - b, b1, b2, c1, c2, sqrt_bc2, eps, step, wd, shrink);
  });
}
}  // namespace

void fused_sgd(DType t, void* p, const void* g, void* buf, int64_t n, const optim::SGDStep& s) {
  if (t == DType::Float32) sgd_loop(static_cast<float*>(p), static_cast<const float*>(g), static_cast<float*>(buf), n, s);
  else sgd_loop(static_cast<double*>(p), static_cast<const double*>(g), static_cast<double*>(buf), n, s);
}

void fused_adam(DType t, void* p, const void* g, void* m, void* v, int64_t n, const optim::AdamStep& s) {
  if (t == DType::Float32)
    adam_loop(static_cast<float*>(p), static_cast<const float*>(g), static_cast<float*>(m), static_cast<float*>(v), n, s);
  else
    adam_loop(static_cast<double*>(p), static_cast<const double*>(g), static_cast<double*>(m), static_cast<double*>(v), n, s);
}

}  // namespace kiln::cpu::KILN_ISA
