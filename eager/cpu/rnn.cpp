// rnn_layer and rnn_layer_backward (core/ops.def): one recurrent layer in one direction over all its steps,
// so that a traced, scripted or compiled LSTM is one node per layer and direction, never T copies of a step.
// The input projection of every step arrives computed (one GEMM, in the composite); here each step is one
// GEMM (h·W_hh^T) and the gate arithmetic: for an LSTM one pass per row through the gates, c, tanh(c) and h
// (rnn_cell_isa.cpp, built per ISA: its five passes around the elementwise kernels' sigmoid and tanh, built for
// the baseline ISA here, took as long as the step's GEMM), for the other cells the elementwise kernels' vector
// sigmoid and tanh; W_hh is packed once for all steps (packed_gemm.h). With "keep" (set where a gradient may be
// wanted) the forward also returns what each step computed — the gates, and c and tanh(c) or the GRU's n-gate
// term — as a second output, which autograd saves (op_facts: the derivative reads both outputs); without it
// that output is empty and the backward runs the forward again (a quarter of a training step's recurrent
// time). The backward walks the steps in reverse with one GEMM each for the gradient of h, and takes W_hh's
// gradient as one GEMM over all steps at the end, reading the h each step read from the output in place.
//
// With "lengths" (a packed sequence, torch.nn.utils.rnn) row n runs only at the steps t < lengths[n]: a
// step leaves the state of a finished row as it was and its output zero, so h_n is the state at the row's
// own last step, and the reverse direction starts each row from state0 at its own last element. Masking
// inside the one node (rather than running the layer per length, or per packed step) keeps one node per
// layer and direction for the tracer, the script frontend and the JIT; rows sorted longest first (as
// PackedSequence keeps them) make the running rows a prefix, and a step computes only up to the last of them.
#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/rnn_mode.h"
#include "core/tsan_annotations.h"
#include "eager/cpu/blas.h"
#include "eager/cpu/copy.h"
#include "eager/cpu/im2col.h"
#include "eager/cpu/isa_kernels.h"
#include "eager/cpu/onednn_switch.h"
#include "eager/cpu/packed_gemm.h"
#include "eager/cpu/views.h"
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
  std::vector<int64_t> lengths;  // empty: every row runs every step
  DType dtype = DType::Float32, compute = DType::Float32;
};

Geom parse(const char* op, const Tensors& in, size_t first, const Attrs& attrs, Args& a) {
  const std::string& name = attrs.s("mode");
  std::optional<RnnMode> mode = rnn_mode(name);
  if (!mode) fail("{}: mode must be lstm, gru, rnn_tanh or rnn_relu, got '{}'", op, name);
  bool bias = attrs.b_or("bias", true);
  const bool has_lengths = attrs.b_or("lengths", false);
  size_t need = first + 2 + (bias ? 1 : 0) + (has_lengths ? 1 : 0);
  if (in.size() != need && in.size() != need + 1)
    fail("{}: expected {} or {} inputs ({}x_proj, w_hh{}, optional state0{}), got {}", op, need, need + 1,
         first ? "grad, out, steps, " : "", bias ? ", b_hh" : "", has_lengths ? ", lengths" : "", in.size());
  const bool has_state = in.size() == need + 1;
  need -= has_lengths ? 1 : 0;  // state0's index
  Geom g;
  g.mode = *mode;
  g.reverse = attrs.b_or("reverse", false);
  const Tensor& x = in[first];
  const Tensor& w = in[first + 1];
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    if (has_lengths && i + 1 == in.size()) continue;  // integer
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
  if (g.T == 0) fail("{}: expected sequence length to be larger than 0", op);
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
  if (has_lengths) {
    const Tensor& len = in.back();
    if (is_floating(len.dtype()) || len.dtype() == DType::Bool || len.dim() != 1 || len.size(0) != g.N)
      fail("{}: expected lengths of {} integers (one per batch row), got {} of shape {}", op, g.N,
           dtype_name(len.dtype()), shape_str(len.sizes()));
    Tensor l = cast_to(len, DType::Int64);
    const int64_t* p = static_cast<const int64_t*>(l.raw_data());
    a.lengths.assign(p, p + g.N);
    for (int64_t n : a.lengths)
      if (n < 0 || n > g.T) fail("{}: expected every length in [0, {}] (the steps), got {}", op, g.T, n);
  }
  if (has_state) {
    Shape want{mode->states, g.N, g.H};
    if (in[need].sizes() != want)
      fail("{}: expected state0 of shape {}, got {}", op, shape_str(want), shape_str(in[need].sizes()));
    a.state0 = conv(in[need]);
  }
  return g;
}

template <class T>
constexpr DType kDType = std::is_same_v<T, double> ? DType::Float64 : DType::Float32;

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

// out = op(in) over `rows` rows of `cols` elements (leading dims in elements), through the elementwise
// kernels of the CPU's instruction set: their vector sigmoid and tanh.
template <class T>
void apply(OpId op, T* out, int64_t out_ld, const T* in, int64_t in_ld, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return;
  StridedLoop L;
  L.nops = 2;
  L.ndim = 2;
  L.ptr[0] = reinterpret_cast<char*>(out);
  L.ptr[1] = reinterpret_cast<char*>(const_cast<T*>(in));
  L.sizes[0] = cols;
  L.sizes[1] = rows;
  L.strides[0][0] = L.strides[1][0] = int64_t(sizeof(T));
  L.strides[0][1] = out_ld * int64_t(sizeof(T));
  L.strides[1][1] = in_ld * int64_t(sizeof(T));
  isa_kernels().unary(op, std::is_same_v<T, double> ? DType::Float64 : DType::Float32, L);
}

// Whether row n runs at step t, and how many leading rows hold every row that runs at t.
bool runs(const Args& a, int64_t n, int64_t t) { return a.lengths.empty() || t < a.lengths[size_t(n)]; }
int64_t running_rows(const Args& a, int64_t t, int64_t N) {
  if (a.lengths.empty()) return N;
  int64_t rows = 0;
  for (int64_t n = 0; n < N; ++n)
    if (t < a.lengths[size_t(n)]) rows = n + 1;
  return rows;
}

// What the forward keeps of each step for the backward: the activated gates [N,G*H], then for an LSTM c and
// tanh(c), for a GRU W_hn·h + b_hn ([N,H] each).
int64_t extras(RnnCell cell) { return cell == RnnCell::Lstm ? 2 : cell == RnnCell::Gru ? 1 : 0; }
int64_t step_size(const Geom& g) { return g.N * g.GH + extras(g.mode.cell) * g.N * g.H; }

// How many threads a layer's steps split its hidden units over: each thread takes a slice of the units, the
// same columns of every gate, so its part of a step's GEMM (its rows of W_hh) and the gate arithmetic of those
// columns run on it back to back, and the threads meet once per step (the next step's GEMM reads all of h).
// At a step's small M (the batch) oneDNN's own split of one GEMM gains little, and the gate loops would run on
// one thread. float only (a double GEMM is OpenBLAS's, whose own threads would contend with the team's), not
// inside another region (the inter-op team), at least a vector of units per thread, and steps large enough to
// pay for a barrier each. Each unit's arithmetic is the same whatever the split, only the GEMM's blocking
// differs, so any split equals one thread's result within float rounding.
template <class T>
int split_threads(const Geom& g) {
#ifdef _OPENMP
  if (!std::is_same_v<T, float> || omp_in_parallel() || !onednn_gemm_enabled()) return 1;
  if (g.N * g.GH * g.H < (int64_t(1) << 16)) return 1;
  return int(std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), g.H / 16)));
#else
  return 1;
#endif
}

// The first unit of thread `i` of `n`: slices on multiples of 16 keep the gate rows vector-aligned.
int64_t unit_begin(int64_t H, int i, int n) { return i == n ? H : (H * i / n) & ~int64_t(15); }

// The threads of a split meet here once a step. libgomp's barrier spins for milliseconds before it sleeps,
// which on a machine with more runnable threads than cores keeps a core from the very thread it waits for;
// this one spins about a step's length, then yields the core.
class StepBarrier {
 public:
  explicit StepBarrier(int n) : n_(n) {}
  // A thread that failed stops the others at their next wait, which then throws (instead of waiting for it
  // forever); the caller rethrows the first thread's own exception.
  struct Abandoned {};
  void abandon() { abandoned_.store(true, std::memory_order_release); }
  void wait() {
    if (n_ == 1) return;
    if (abandoned_.load(std::memory_order_acquire)) throw Abandoned{};
    const unsigned gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      return;
    }
    for (unsigned k = 0; generation_.load(std::memory_order_acquire) == gen; ++k) {
      if (abandoned_.load(std::memory_order_acquire)) throw Abandoned{};
      if (k < 2048) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<unsigned> generation_{0};
  std::atomic<bool> abandoned_{false};
};

// Runs body(thread, barrier) on `n` threads (or on this one); body calls barrier.wait() between steps. An
// exception may not leave a parallel region: the first one thrown is rethrown after it.
template <class F>
void on_threads(int n, F&& body) {
  StepBarrier barrier(n);
  if (n == 1) return body(0, 1, barrier);
#ifdef _OPENMP
  std::exception_ptr error;
  KILN_TSAN_RELEASE(&barrier);
#pragma omp parallel num_threads(n)
  {
    KILN_TSAN_ACQUIRE(&barrier);
    omp_set_num_threads(1);  // this thread's count inside the region: what oneDNN sizes the slice's GEMM for
    try {
      body(omp_get_thread_num(), n, barrier);
    } catch (const StepBarrier::Abandoned&) {
      // another thread failed first; its exception is the one to rethrow
    } catch (...) {
      barrier.abandon();
#pragma omp critical(kiln_rnn_error)
      if (!error) error = std::current_exception();
    }
    KILN_TSAN_RELEASE(&barrier);
  }
  KILN_TSAN_ACQUIRE(&barrier);
  if (error) std::rethrow_exception(error);
#endif
}

// The forward pass into out [T+S,N,H]. ws holds step_size() per step: for every step when `keep` (the
// backward reads them), else two slots used in turn.
template <class T>
void forward(const Geom& g, const Args& a, T* out, T* ws, bool keep) {
  const int64_t T_ = g.T, N_ = g.N, H = g.H, GH = g.GH, NH = N_ * H, SS = step_size(g), G = g.mode.gates;
  const T* x = ptr<T>(a.x);
  const T* w = ptr<T>(a.w);
  const T* b = ptr<T>(a.b);
  const T* s0 = ptr<T>(a.state0);
  const RnnCell cell = g.mode.cell;
  std::vector<T> zero(size_t(NH), T(0));
  // a packed sequence's finished rows leave their gates unwritten, and the backward reads none of them
  if (!a.lengths.empty()) std::fill(ws, ws + (keep ? T_ : 2) * SS, T(0));
  const T* h0 = s0 ? s0 : zero.data();
  const T* c0 = cell == RnnCell::Lstm && s0 ? s0 + NH : zero.data();
  const int nt = split_threads<T>(g);
  on_threads(nt, [&](int tid, int n_threads, StepBarrier& barrier) {
    const int64_t j0 = unit_begin(H, tid, n_threads), Hs = unit_begin(H, tid + 1, n_threads) - j0, GHs = G * Hs;
    // this slice's rows of W_hh, gate after gate, so that its GEMM yields just its pre-activations [N, G*Hs]
    std::vector<T> w_slice;
    const T* ws_w = w;
    if (Hs != H) {
      w_slice.resize(size_t(GHs * H));
      for (int64_t k = 0; k < G; ++k)
        std::copy(w + (k * H + j0) * H, w + (k * H + j0 + Hs) * H, w_slice.data() + k * Hs * H);
      ws_w = w_slice.data();
    }
    PackedGemm<T> step_gemm(true, N_, GHs, H, ws_w, H, T(0));  // h·W_hh^T, W_hh packed once for all steps
    std::vector<T> pre(size_t(N_ * GHs), T(0));
    const T* h = h0;
    const T* c = c0;
    for (int64_t s = 0; s < T_; ++s) {
      const int64_t t = g.reverse ? T_ - 1 - s : s;
      const T* c_prev = c;
      T* gt = ws + (keep ? t : s % 2) * SS;  // the gates, then the extras
      T* e0 = gt + N_ * GH;
      T* e1 = e0 + NH;
      T* ht = out + t * NH;
      const int64_t N = running_rows(a, t, N_);  // the rows after the last running one wait
      if (Hs > 0 && N > 0) step_gemm(h, pre.data(), N);
      const T* xt = x + t * N_ * GH;
      if (cell == RnnCell::Lstm) {  // the gates, c and h in one pass per row (rnn_cell.h)
        for (int64_t n = 0; n < N; ++n) {
          LstmForwardRow r{H, j0, j0 + Hs, pre.data() + n * GHs, Hs, xt + n * GH, b,
                           c + n * H, gt + n * GH, e0 + n * H, e1 + n * H, ht + n * H};
          isa_kernels().lstm_forward_row(kDType<T>, r);
        }
        c = e0;
      }
      // the pre-activations x + h·W_hh^T + b_hh, but GRU's n gate keeps W_hn·h + b_hn apart (r multiplies it)
      const int64_t summed = cell == RnnCell::Gru ? 2 : G;
      for (int64_t n = 0; n < N && cell != RnnCell::Lstm; ++n) {
        T* pr = pre.data() + n * GHs;
        const T* xr = xt + n * GH + j0;
        const T* br = b ? b + j0 : nullptr;
        for (int64_t k = 0; k < summed; ++k) {
          if (br) {
#pragma omp simd
            for (int64_t j = 0; j < Hs; ++j) pr[k * Hs + j] += xr[k * H + j] + br[k * H + j];
          } else {
#pragma omp simd
            for (int64_t j = 0; j < Hs; ++j) pr[k * Hs + j] += xr[k * H + j];
          }
        }
        if (cell == RnnCell::Gru)
          for (int64_t j = 0; j < Hs; ++j) e0[n * H + j0 + j] = pr[2 * Hs + j] + (br ? br[2 * H + j] : T(0));
      }
      // gate k of this slice: pre's columns [k*Hs, (k+1)*Hs) into the gates' [k*H + j0, ...)
      auto gate = [&](OpId op, int64_t k, int64_t gates) {
        apply(op, gt + k * H + j0, GH, pre.data() + k * Hs, GHs, N, gates * Hs);
      };
      // gates 0 and 1 through a sigmoid: one call where the slice is the whole width (their columns adjoin)
      auto sigmoid_01 = [&] {
        if (Hs == H) {
          gate(OpId::Sigmoid, 0, 2);
        } else {
          gate(OpId::Sigmoid, 0, 1);
          gate(OpId::Sigmoid, 1, 1);
        }
      };
      switch (cell) {
        case RnnCell::Lstm: break;  // above
        case RnnCell::Gru: {
          sigmoid_01();  // r, z
          for (int64_t n = 0; n < N; ++n) {
            const T* xr = xt + n * GH;
            T* pr = pre.data() + n * GHs;
            for (int64_t j = 0; j < Hs; ++j)
              pr[2 * Hs + j] = xr[2 * H + j0 + j] + gt[n * GH + j0 + j] * e0[n * H + j0 + j];
          }
          gate(OpId::Tanh, 2, 1);  // n
          for (int64_t n = 0; n < N; ++n) {
            const T* gr = gt + n * GH;
            for (int64_t j = j0; j < j0 + Hs; ++j) {
              T z = gr[H + j];
              ht[n * H + j] = (T(1) - z) * gr[2 * H + j] + z * h[n * H + j];
            }
          }
          break;
        }
        case RnnCell::Tanh: apply(OpId::Tanh, ht + j0, H, pre.data(), GHs, N, Hs); break;
        case RnnCell::Relu: apply(OpId::Relu, ht + j0, H, pre.data(), GHs, N, Hs); break;
      }
      // a row that does not run at t carries its state (the caller zeroes its output)
      for (int64_t n = 0; n < N_; ++n) {
        if (runs(a, n, t)) continue;
        std::copy(h + n * H + j0, h + n * H + j0 + Hs, ht + n * H + j0);
        if (cell == RnnCell::Lstm) std::copy(c_prev + n * H + j0, c_prev + n * H + j0 + Hs, e0 + n * H + j0);
      }
      h = ht;
      barrier.wait();
    }
  });
  const int64_t last = g.reverse ? 0 : T_ - 1;
  const T* h = out + last * NH;
  std::copy(h, h + NH, out + T_ * NH);
  if (cell == RnnCell::Lstm) {
    const T* c = ws + (keep ? last : (T_ - 1) % 2) * SS + N_ * GH;
    std::copy(c, c + NH, out + (T_ + 1) * NH);
  }
}

// The backward pass over the forward's out and ws (kept for every step): gx [T,N,G*H], gwT [H,G*H] (W_hh's
// gradient transposed), gb [G*H], gs [S,N,H]. Split as the forward: a thread's units' gate arithmetic, then
// (once every thread's d(pre) of the step is there) its columns of dh += d(pre)·W_hh.
template <class T>
void backward(const Geom& g, const Args& a, const T* gy, const T* out, const T* ws, T* gx, T* gwT, T* gb,
              T* gs) {
  const int64_t T_ = g.T, N = g.N, H = g.H, GH = g.GH, NH = N * H, SS = step_size(g);
  const T* w = ptr<T>(a.w);
  const T* s0 = ptr<T>(a.state0);
  const bool lstm = g.mode.cell == RnnCell::Lstm;
  std::vector<T> zero(size_t(NH), T(0));
  std::vector<T> dh(gy + T_ * NH, gy + (T_ + 1) * NH), dc(size_t(NH), T(0));
  if (lstm) dc.assign(gy + (T_ + 1) * NH, gy + (T_ + 2) * NH);
  // d(pre-activation of h·W_hh^T) of every step: W_hh's gradient is its product with the h each step read
  // (for all but the GRU that is x_proj's gradient itself: the GRU's n gate alone differs, by r)
  const bool gru = g.mode.cell == RnnCell::Gru;
  std::vector<T> dall_gru(gru ? size_t(T_ * N * GH) : 0, T(0));
  T* dall = gru ? dall_gru.data() : gx;
  const T* h0 = s0 ? s0 : zero.data();
  const T* c0 = lstm && s0 ? s0 + NH : zero.data();
  std::fill(gb, gb + GH, T(0));
  const int nt = split_threads<T>(g);
  on_threads(nt, [&](int tid, int n_threads, StepBarrier& barrier) {
    const int64_t j0 = unit_begin(H, tid, n_threads), j1 = unit_begin(H, tid + 1, n_threads);
    PackedGemm<T> dh_gemm(false, N, j1 - j0, GH, w + j0, H, T(1));  // dh[:, j0:j1] += d(pre)·W_hh[:, j0:j1]
    std::vector<T> dhs(size_t(N * (j1 - j0)));  // this slice's columns of dh, rows contiguous as the GEMM's C
    for (int64_t n = 0; n < N; ++n) std::copy(dh.data() + n * H + j0, dh.data() + n * H + j1, dhs.data() + n * (j1 - j0));
    for (int64_t s = T_ - 1; s >= 0; --s) {
      const int64_t t = g.reverse ? T_ - 1 - s : s, tp = g.reverse ? t + 1 : t - 1;
      const T* hp = s == 0 ? h0 : out + tp * NH;
      const T* cp = s == 0 ? c0 : ws + tp * SS + N * GH;
      const T* gyt = gy + t * NH;
      const T* gt = ws + t * SS;
      const T* et = gt + N * GH;  // LSTM: c, then tanh(c); GRU: W_hn·h + b_hn
      const T* ht = out + t * NH;
      T* gxt = gx + t * N * GH;
      T* dt = dall + t * N * GH;
      for (int64_t n = 0; n < N; ++n) {
        const T* gr = gt + n * GH;
        T* gxr = gxt + n * GH;
        T* dr = dt + n * GH;
        T* dhr = dhs.data() + n * (j1 - j0);  // this slice's columns: unit j at dhr[j - j0]
        if (!runs(a, n, t)) {  // the state passes through untouched; the zero output takes no gradient
          for (int64_t k = 0; k < g.mode.gates; ++k) std::fill(gxr + k * H + j0, gxr + k * H + j1, T(0));
          continue;
        }
        // the cell's switch outside the unit loop, which then vectorises (the pointers never overlap)
        const T* gyr = gyt + n * H;
        const T* hpr = hp + n * H;
        const T* htr = ht + n * H;
        const T* er = et + n * H;
        T* dcr = dc.data() + n * H;
        switch (g.mode.cell) {
          case RnnCell::Lstm:
            isa_kernels().lstm_backward_row(kDType<T>, LstmBackwardRow{H, j0, j1, dhr, gyr, gr, er + NH, cp + n * H, dcr, dr});
            break;
          case RnnCell::Gru:
#pragma omp simd
            for (int64_t j = j0; j < j1; ++j) {
              T d = dhr[j - j0] + gyr[j];
              T r = gr[j], z = gr[H + j], nn = gr[2 * H + j];
              T dn = d * (T(1) - z) * (T(1) - nn * nn);
              gxr[j] = dr[j] = dn * er[j] * r * (T(1) - r);
              gxr[H + j] = dr[H + j] = d * (hpr[j] - nn) * z * (T(1) - z);
              gxr[2 * H + j] = dn;
              dr[2 * H + j] = dn * r;
              dhr[j - j0] = d * z;
            }
            break;
          case RnnCell::Tanh:
#pragma omp simd
            for (int64_t j = j0; j < j1; ++j) {
              dr[j] = (dhr[j - j0] + gyr[j]) * (T(1) - htr[j] * htr[j]);
              dhr[j - j0] = T(0);
            }
            break;
          case RnnCell::Relu:
#pragma omp simd
            for (int64_t j = j0; j < j1; ++j) {
              dr[j] = htr[j] > T(0) ? dhr[j - j0] + gyr[j] : T(0);
              dhr[j - j0] = T(0);
            }
            break;
        }
      }
      barrier.wait();  // the GEMM reads every thread's d(pre) of the step
      if (j1 > j0 && N > 0) dh_gemm(dt, dhs.data(), N);
    }
    for (int64_t n = 0; n < N; ++n) std::copy(dhs.data() + n * (j1 - j0), dhs.data() + (n + 1) * (j1 - j0), dh.data() + n * H + j0);
    // b_hh's gradient over this slice's columns of d(pre), which only this thread wrote
    for (int64_t r = 0; r < T_ * N; ++r)
      for (int64_t k = 0; k < g.mode.gates; ++k) {
        const T* dr = dall + r * GH + k * H;
        for (int64_t j = j0; j < j1; ++j) gb[k * H + j] += dr[j];
      }
  });
  std::copy(dh.begin(), dh.end(), gs);
  if (lstm) std::copy(dc.begin(), dc.end(), gs + NH);
  // W_hh's gradient transposed, gwT [H, G*H] = Σ_t h_{t-1}^T·d(pre)_t: the h a step read is the output of the
  // step before it (their rows lie in out in order) or state0. Read this way round the GEMM walks both operands
  // along their rows: 1.4x the speed of d(pre)^T·h (oneDNN's sgemm, [256,700]·[700,1024], AVX-512).
  const int64_t later = (T_ - 1) * N;  // the rows of the steps that read a previous step's h
  if (later > 0 && H > 0)
    blas::gemm(true, false, H, GH, later, out + (g.reverse ? NH : 0), H, dall + (g.reverse ? 0 : N * GH), GH, T(0), gwT, GH);
  if (s0 && N > 0 && H > 0)
    blas::gemm(true, false, H, GH, N, s0, H, dall + (g.reverse ? T_ - 1 : 0) * N * GH, GH, T(later > 0 ? 1 : 0), gwT, GH);
  else if (later == 0)
    std::fill(gwT, gwT + GH * H, T(0));
}

Tensor to_dtype(const Tensor& t, DType dt) { return t.dtype() == dt ? t : cast_to(t, dt); }

}  // namespace

Tensors kernel_rnn_layer(OpId, const Tensors& in, const Attrs& attrs) {
  Args a;
  Geom g = parse("rnn_layer", in, 0, attrs, a);
  Tensor out = Tensor::empty({g.T + g.mode.states, g.N, g.H}, a.compute);
  // the steps are kept only in the compute dtype (a bf16 layer's backward recomputes them in float32)
  const bool keep = attrs.b_or("keep", false) && a.dtype == a.compute;
  Tensor steps = Tensor::empty({keep ? g.T : 0, step_size(g)}, a.dtype);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> two_steps(keep ? 0 : size_t(2 * step_size(g)));
    T* o = static_cast<T*>(out.raw_data());
    forward<T>(g, a, o, keep ? static_cast<T*>(steps.raw_data()) : two_steps.data(), keep);
    for (int64_t t = 0; t < g.T; ++t)  // torch's padded output: zero past each row's length
      for (int64_t n = 0; n < g.N; ++n)
        if (!runs(a, n, t)) std::fill(o + (t * g.N + n) * g.H, o + (t * g.N + n + 1) * g.H, T(0));
  };
  if (a.compute == DType::Float64) run(double(0));
  else run(float(0));
  return {to_dtype(out, a.dtype), steps};
}

Tensors kernel_rnn_layer_backward(OpId, const Tensors& in, const Attrs& attrs) {
  const char* op = "rnn_layer_backward";
  Args a;
  Geom g = parse(op, in, 3, attrs, a);
  Shape want{g.T + g.mode.states, g.N, g.H};
  for (size_t i : {0, 1})
    if (in[i].sizes() != want)
      fail("{}: expected {} of shape {} (rnn_layer's output), got {}", op, i ? "out" : "grad", shape_str(want),
           shape_str(in[i].sizes()));
  // rnn_layer's kept steps, or none (it ran without "keep", or in another dtype): then the forward runs again
  const bool kept = in[2].numel() > 0;
  if (kept && (in[2].sizes() != Shape{g.T, step_size(g)} || a.dtype != a.compute))
    fail("{}: expected the kept steps of shape [{}, {}] in {}, got {} in {}", op, g.T, step_size(g),
         dtype_name(a.compute), shape_str(in[2].sizes()), dtype_name(in[2].dtype()));
  Tensor gy = in[0].dtype() == a.compute ? im2col::dense(in[0]) : cast_to(in[0], a.compute);
  Tensor gx = Tensor::empty({g.T, g.N, g.GH}, a.compute), gwT = Tensor::empty({g.H, g.GH}, a.compute);
  Tensor gb = Tensor::empty({g.GH}, a.compute), gs = Tensor::empty({g.mode.states, g.N, g.H}, a.compute);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    Tensor out_kept, steps_kept;
    std::vector<T> out_again, steps_again;
    const T *out, *steps;
    if (kept) {
      out_kept = im2col::dense(in[1]);
      steps_kept = im2col::dense(in[2]);
      out = static_cast<const T*>(out_kept.raw_data());
      steps = static_cast<const T*>(steps_kept.raw_data());
      if (g.reverse && !a.lengths.empty()) {
        // rnn_layer zeroed its output past each row's length, where the reverse direction carried state0's h:
        // the state its row's first step read, which the backward reads back from the output
        out_again.assign(out, out + out_kept.numel());
        const T* h0 = ptr<T>(a.state0);
        for (int64_t t = 0; t < g.T; ++t)
          for (int64_t n = 0; n < g.N; ++n)
            if (!runs(a, n, t))
              for (int64_t j = 0; j < g.H; ++j) out_again[size_t((t * g.N + n) * g.H + j)] = h0 ? h0[n * g.H + j] : T(0);
        out = out_again.data();
      }
    } else {
      out_again.resize(size_t((g.T + g.mode.states) * g.N * g.H));
      steps_again.resize(size_t(g.T * step_size(g)));
      forward<T>(g, a, out_again.data(), steps_again.data(), true);
      out = out_again.data();
      steps = steps_again.data();
    }
    backward<T>(g, a, static_cast<const T*>(gy.raw_data()), out, steps, static_cast<T*>(gx.raw_data()),
                static_cast<T*>(gwT.raw_data()), static_cast<T*>(gb.raw_data()), static_cast<T*>(gs.raw_data()));
  };
  if (a.compute == DType::Float64) run(double(0));
  else run(float(0));
  Tensor gw = Tensor::empty({g.GH, g.H}, a.dtype);
  // the transposing copy's register tiles, and the dtype's cast; the view made here (Tensor::transpose is an op)
  copy_into(gw, make_view(gwT, {g.GH, g.H}, {1, g.GH}, 0));
  return {to_dtype(gx, a.dtype), gw, to_dtype(gb, a.dtype), to_dtype(gs, a.dtype)};
}

}  // namespace kiln::cpu
