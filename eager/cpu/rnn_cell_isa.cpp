// The LSTM step's gate arithmetic (eager/cpu/rnn_cell.h), compiled once per instruction set with the elementwise
// kernels (eager/meson.build). It was five passes over the step's gates in rnn.cpp, built for the baseline ISA,
// around the elementwise kernels' vector sigmoid and tanh: as long as the step's GEMM. The formulas are the
// elementwise kernels' (sigmoid 1 / (1 + exp(-x))) and the association of the sums is rnn.cpp's, so a layer
// gives the same numbers whichever runs.
#include <cmath>

#include "eager/cpu/isa_kernels.h"
#include "eager/cpu/rnn_cell.h"
#include "eager/cpu/simd_math.h"

namespace kiln::cpu::KILN_ISA {
namespace {

template <typename T>
[[gnu::always_inline]] inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <typename T, bool kBias>
void forward_row(const LstmForwardRow& r) {
  const int64_t H = r.H, j0 = r.j0, j1 = r.j1;
  const T* p = static_cast<const T*>(r.pre) - j0;
  const T* x = static_cast<const T*>(r.x);
  const T* b = static_cast<const T*>(r.b);
  const T* cp = static_cast<const T*>(r.c_prev);
  T* g = static_cast<T*>(r.gates);
  T* c = static_cast<T*>(r.c);
  T* tc = static_cast<T*>(r.tanh_c);
  T* h = static_cast<T*>(r.h);
  const int64_t pg = r.pre_gate;
#pragma omp simd
  for (int64_t j = j0; j < j1; ++j) {
    T a[4];
    for (int k = 0; k < 4; ++k) a[k] = p[k * pg + j] + (kBias ? x[k * H + j] + b[k * H + j] : x[k * H + j]);
    const T i = sigmoid(a[0]), f = sigmoid(a[1]), gg = std::tanh(a[2]), o = sigmoid(a[3]);
    g[j] = i;
    g[H + j] = f;
    g[2 * H + j] = gg;
    g[3 * H + j] = o;
    const T cn = f * cp[j] + i * gg;
    const T t = std::tanh(cn);
    c[j] = cn;
    tc[j] = t;
    h[j] = o * t;
  }
}

template <typename T>
void backward_row(const LstmBackwardRow& r) {
  const int64_t H = r.H, j0 = r.j0, j1 = r.j1;
  T* dh = static_cast<T*>(r.dh) - j0;
  const T* gy = static_cast<const T*>(r.gy);
  const T* g = static_cast<const T*>(r.gates);
  const T* tcr = static_cast<const T*>(r.tanh_c);
  const T* cp = static_cast<const T*>(r.c_prev);
  T* dc = static_cast<T*>(r.dc);
  T* d = static_cast<T*>(r.dpre);
#pragma omp simd
  for (int64_t j = j0; j < j1; ++j) {
    const T dy = dh[j] + gy[j];
    const T i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
    const T tc = tcr[j];
    const T dct = dc[j] + dy * o * (T(1) - tc * tc);
    d[j] = dct * gg * i * (T(1) - i);
    d[H + j] = dct * cp[j] * f * (T(1) - f);
    d[2 * H + j] = dct * i * (T(1) - gg * gg);
    d[3 * H + j] = dy * tc * o * (T(1) - o);
    dc[j] = dct * f;
    dh[j] = T(0);
  }
}

}  // namespace

void lstm_forward_row(DType t, const LstmForwardRow& r) {
  if (t == DType::Float64) r.b ? forward_row<double, true>(r) : forward_row<double, false>(r);
  else r.b ? forward_row<float, true>(r) : forward_row<float, false>(r);
}

void lstm_backward_row(DType t, const LstmBackwardRow& r) {
  if (t == DType::Float64) backward_row<double>(r);
  else backward_row<float>(r);
}

}  // namespace kiln::cpu::KILN_ISA
