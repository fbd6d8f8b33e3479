// rnn_layer and rnn_layer_backward (core/ops.def): one recurrent layer in one direction over all its steps,
// so that a traced, scripted or compiled LSTM is one node per layer and direction, never T copies of a step.
// The input projection of every step arrives computed (one GEMM, in the composite); here each step is one
// GEMM (h·W_hh^T) and one pass over the gates. The backward runs the forward again to get the gates of every
// step back (the forward node then saves only its inputs), walks the steps in reverse with one GEMM each for
// the gradient of h, and takes W_hh's gradient as one GEMM over all steps at the end.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rnn_mode.h"
#include "eager/cpu/blas.h"
#include "eager/cpu/copy.h"
#include "eager/cpu/im2col.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

struct Geom {
  RnnMode mode{};
  bool reverse = false;
  int64_t T = 0, N = 0, H = 0, GH = 0;
};

// The inputs of one call in the compute type, contiguous; b and state0 undefined when absent.
struct Args {
  Tensor x, w, b, state0;
  DType dtype = DType::Float32, compute = DType::Float32;
};

Geom parse(const char* op, const Tensors& in, size_t first, const Attrs& attrs, Args& a) {
  const std::string& name = attrs.s("mode");
  std::optional<RnnMode> mode = rnn_mode(name);
  if (!mode) fail("{}: mode must be lstm, gru, rnn_tanh or rnn_relu, got '{}'", op, name);
  bool bias = attrs.b_or("bias", true);
  size_t need = first + 2 + (bias ? 1 : 0);
  if (in.size() != need && in.size() != need + 1)
    fail("{}: expected {} or {} inputs ({}x_proj, w_hh{}, optional state0), got {}", op, need, need + 1,
         first ? "grad, " : "", bias ? ", b_hh" : "", in.size());
  Geom g;
  g.mode = *mode;
  g.reverse = attrs.b_or("reverse", false);
  const Tensor& x = in[first];
  const Tensor& w = in[first + 1];
  for (const Tensor& t : in) {
    if (!is_floating(t.dtype())) fail("{}: dtype {} is not supported", op, dtype_name(t.dtype()));
    if (t.dtype() != x.dtype())
      fail("{}: all inputs must have one dtype, got {} and {}", op, dtype_name(x.dtype()), dtype_name(t.dtype()));
  }
  if (w.dim() != 2) fail("{}: expected w_hh of 2 dims [G*H, H], got {}", op, shape_str(w.sizes()));
  g.H = w.size(1);
  g.GH = mode->gates * g.H;
  if (w.size(0) != g.GH)
    fail("{}: expected w_hh of shape [{}, {}] ({} gates of hidden size {}), got {}", op, g.GH, g.H, mode->gates, g.H,
         shape_str(w.sizes()));
  if (x.dim() != 3 || x.size(2) != g.GH)
    fail("{}: expected x_proj of shape [T, N, {}], got {}", op, g.GH, shape_str(x.sizes()));
  g.T = x.size(0);
  g.N = x.size(1);
  a.dtype = x.dtype();
  a.compute = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  auto conv = [&](const Tensor& t) { return t.dtype() == a.compute ? im2col::dense(t) : cast_to(t, a.compute); };
  a.x = conv(x);
  a.w = conv(w);
  if (bias) {
    if (in[first + 2].sizes() != Shape{g.GH})
      fail("{}: expected b_hh of shape [{}], got {}", op, g.GH, shape_str(in[first + 2].sizes()));
    a.b = conv(in[first + 2]);
  }
  if (in.size() == need + 1) {
    Shape want{mode->states, g.N, g.H};
    if (in[need].sizes() != want)
      fail("{}: expected state0 of shape {}, got {}", op, shape_str(want), shape_str(in[need].sizes()));
    a.state0 = conv(in[need]);
  }
  return g;
}

template <class T>
T sigm(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

// The forward pass. out [T+S,N,H]; gates [T,N,G*H] holds each step's activated gates and extra [T,N,H] LSTM's
// c or GRU's W_hn·h + b_hn, for every step when `keep` (the backward reads them), else the last step's only.
template <class T>
void forward(const Geom& g, const Args& a, T* out, std::vector<T>& gates, std::vector<T>& extra, bool keep) {
  const int64_t T_ = g.T, N = g.N, H = g.H, GH = g.GH, NH = N * H;
  const T* x = ptr<T>(a.x);
  const T* w = ptr<T>(a.w);
  const T* b = ptr<T>(a.b);
  const T* s0 = ptr<T>(a.state0);
  const bool lstm = g.mode.cell == RnnCell::Lstm;
  std::vector<T> zero(size_t(NH), T(0)), hg(size_t(N * GH), T(0));
  gates.assign(size_t((keep ? T_ : 1) * N * GH), T(0));
  extra.assign(size_t((keep ? T_ : 2) * NH), T(0));
  const T* h = s0 ? s0 : zero.data();
  const T* c = lstm && s0 ? s0 + NH : zero.data();
  for (int64_t s = 0; s < T_; ++s) {
    const int64_t t = g.reverse ? T_ - 1 - s : s;
    if (H > 0 && N > 0) blas::gemm(false, true, N, GH, H, h, H, w, H, T(0), hg.data(), GH);
    const T* xt = x + t * N * GH;
    T* ht = out + t * NH;
    T* gt = gates.data() + (keep ? t * N * GH : 0);
    T* et = extra.data() + (keep ? t : s % 2) * NH;
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = xt + n * GH;
      const T* hr = hg.data() + n * GH;
      T* gr = gt + n * GH;
      for (int64_t j = 0; j < H; ++j) {
        auto pre = [&](int64_t k) { return xr[k * H + j] + hr[k * H + j] + (b ? b[k * H + j] : T(0)); };
        const int64_t e = n * H + j;
        switch (g.mode.cell) {
          case RnnCell::Lstm: {
            T i = sigm(pre(0)), f = sigm(pre(1)), gg = std::tanh(pre(2)), o = sigm(pre(3));
            T cn = f * c[e] + i * gg;
            gr[j] = i, gr[H + j] = f, gr[2 * H + j] = gg, gr[3 * H + j] = o;
            et[e] = cn;
            ht[e] = o * std::tanh(cn);
            break;
          }
          case RnnCell::Gru: {
            T r = sigm(pre(0)), z = sigm(pre(1));
            T hn = hr[2 * H + j] + (b ? b[2 * H + j] : T(0));
            T nn = std::tanh(xr[2 * H + j] + r * hn);
            gr[j] = r, gr[H + j] = z, gr[2 * H + j] = nn;
            et[e] = hn;
            ht[e] = (T(1) - z) * nn + z * h[e];
            break;
          }
          case RnnCell::Tanh: ht[e] = std::tanh(pre(0)); break;
          case RnnCell::Relu: ht[e] = std::max(pre(0), T(0)); break;
        }
      }
    }
    h = ht;
    if (lstm) c = et;
  }
  std::copy(h, h + NH, out + T_ * NH);
  if (lstm) std::copy(c, c + NH, out + (T_ + 1) * NH);
}

// The backward pass over the forward's out, gates and extra (kept for every step): gx [T,N,G*H], gw [G*H,H],
// gb [G*H], gs [S,N,H].
template <class T>
void backward(const Geom& g, const Args& a, const T* gy, const T* out, const std::vector<T>& gates,
              const std::vector<T>& extra, T* gx, T* gw, T* gb, T* gs) {
  const int64_t T_ = g.T, N = g.N, H = g.H, GH = g.GH, NH = N * H;
  const T* w = ptr<T>(a.w);
  const T* s0 = ptr<T>(a.state0);
  const bool lstm = g.mode.cell == RnnCell::Lstm;
  std::vector<T> zero(size_t(NH), T(0));
  std::vector<T> dh(gy + T_ * NH, gy + (T_ + 1) * NH), dc(size_t(NH), T(0));
  if (lstm) dc.assign(gy + (T_ + 1) * NH, gy + (T_ + 2) * NH);
  // d(pre-activation of h·W_hh^T) of every step, and the h each step read: W_hh's gradient is their product
  std::vector<T> dall(size_t(T_ * N * GH), T(0)), hprev(size_t(T_ * NH), T(0));
  const T* h0 = s0 ? s0 : zero.data();
  const T* c0 = lstm && s0 ? s0 + NH : zero.data();
  for (int64_t s = T_ - 1; s >= 0; --s) {
    const int64_t t = g.reverse ? T_ - 1 - s : s, tp = g.reverse ? t + 1 : t - 1;
    const T* hp = s == 0 ? h0 : out + tp * NH;
    const T* cp = s == 0 ? c0 : extra.data() + tp * NH;
    std::copy(hp, hp + NH, hprev.data() + t * NH);
    const T* gyt = gy + t * NH;
    const T* gt = gates.data() + t * N * GH;
    const T* et = extra.data() + t * NH;
    const T* ht = out + t * NH;
    T* gxt = gx + t * N * GH;
    T* dt = dall.data() + t * N * GH;
    for (int64_t n = 0; n < N; ++n) {
      const T* gr = gt + n * GH;
      T* gxr = gxt + n * GH;
      T* dr = dt + n * GH;
      for (int64_t j = 0; j < H; ++j) {
        const int64_t e = n * H + j;
        T d = dh[e] + gyt[e];
        switch (g.mode.cell) {
          case RnnCell::Lstm: {
            T i = gr[j], f = gr[H + j], gg = gr[2 * H + j], o = gr[3 * H + j];
            T tc = std::tanh(et[e]);
            T dct = dc[e] + d * o * (T(1) - tc * tc);
            dr[j] = dct * gg * i * (T(1) - i);
            dr[H + j] = dct * cp[e] * f * (T(1) - f);
            dr[2 * H + j] = dct * i * (T(1) - gg * gg);
            dr[3 * H + j] = d * tc * o * (T(1) - o);
            for (int64_t k = 0; k < 4; ++k) gxr[k * H + j] = dr[k * H + j];
            dc[e] = dct * f;
            dh[e] = T(0);
            break;
          }
          case RnnCell::Gru: {
            T r = gr[j], z = gr[H + j], nn = gr[2 * H + j];
            T dn = d * (T(1) - z) * (T(1) - nn * nn);
            gxr[j] = dr[j] = dn * et[e] * r * (T(1) - r);
            gxr[H + j] = dr[H + j] = d * (hp[e] - nn) * z * (T(1) - z);
            gxr[2 * H + j] = dn;
            dr[2 * H + j] = dn * r;
            dh[e] = d * z;
            break;
          }
          case RnnCell::Tanh:
            gxr[j] = dr[j] = d * (T(1) - ht[e] * ht[e]);
            dh[e] = T(0);
            break;
          case RnnCell::Relu:
            gxr[j] = dr[j] = ht[e] > T(0) ? d : T(0);
            dh[e] = T(0);
            break;
        }
      }
    }
    if (H > 0 && N > 0) blas::gemm(false, false, N, H, GH, dt, GH, w, H, T(1), dh.data(), H);
  }
  std::copy(dh.begin(), dh.end(), gs);
  if (lstm) std::copy(dc.begin(), dc.end(), gs + NH);
  std::fill(gw, gw + GH * H, T(0));
  if (T_ * N > 0 && H > 0) blas::gemm(true, false, GH, H, T_ * N, dall.data(), GH, hprev.data(), H, T(0), gw, H);
  std::fill(gb, gb + GH, T(0));
  for (int64_t r = 0; r < T_ * N; ++r)
    for (int64_t k = 0; k < GH; ++k) gb[k] += dall[size_t(r * GH + k)];
}

Tensor to_dtype(const Tensor& t, DType dt) { return t.dtype() == dt ? t : cast_to(t, dt); }

}  // namespace

Tensors kernel_rnn_layer(OpId, const Tensors& in, const Attrs& attrs) {
  Args a;
  Geom g = parse("rnn_layer", in, 0, attrs, a);
  Tensor out = Tensor::empty({g.T + g.mode.states, g.N, g.H}, a.compute);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> gates, extra;
    forward<T>(g, a, static_cast<T*>(out.raw_data()), gates, extra, false);
  };
  if (a.compute == DType::Float64) run(double(0));
  else run(float(0));
  return {to_dtype(out, a.dtype)};
}

Tensors kernel_rnn_layer_backward(OpId, const Tensors& in, const Attrs& attrs) {
  const char* op = "rnn_layer_backward";
  Args a;
  Geom g = parse(op, in, 1, attrs, a);
  Shape want{g.T + g.mode.states, g.N, g.H};
  if (in[0].sizes() != want)
    fail("{}: expected grad of shape {} (rnn_layer's output), got {}", op, shape_str(want), shape_str(in[0].sizes()));
  Tensor gy = in[0].dtype() == a.compute ? im2col::dense(in[0]) : cast_to(in[0], a.compute);
  Tensor gx = Tensor::empty({g.T, g.N, g.GH}, a.compute), gw = Tensor::empty({g.GH, g.H}, a.compute);
  Tensor gb = Tensor::empty({g.GH}, a.compute), gs = Tensor::empty({g.mode.states, g.N, g.H}, a.compute);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> out(size_t((g.T + g.mode.states) * g.N * g.H)), gates, extra;
    forward<T>(g, a, out.data(), gates, extra, true);
    backward<T>(g, a, static_cast<const T*>(gy.raw_data()), out.data(), gates, extra, static_cast<T*>(gx.raw_data()),
                static_cast<T*>(gw.raw_data()), static_cast<T*>(gb.raw_data()), static_cast<T*>(gs.raw_data()));
  };
  if (a.compute == DType::Float64) run(double(0));
  else run(float(0));
  return {to_dtype(gx, a.dtype), to_dtype(gw, a.dtype), to_dtype(gb, a.dtype), to_dtype(gs, a.dtype)};
}

}  // namespace kiln::cpu
