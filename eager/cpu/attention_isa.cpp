// The fused attention loops (eager/cpu/attention.h), compiled once per instruction set with the elementwise
// kernels (eager/meson.build) so that the row loops vectorise at the CPU's width and exp calls libmvec.
// A head's scores exist only as one [kQ, kK] tile at a time: the forward keeps a running max and sum per query
// row (the online softmax) and returns log(sum(exp(s))) per row, from which the backward recomputes each tile's
// probabilities instead of reading them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "eager/cpu/attention.h"
#include "eager/cpu/isa_kernels.h"
#include "eager/cpu/simd_math.h"

namespace kiln::cpu::KILN_ISA {
namespace {

constexpr int64_t kQ = 32;  // query rows per tile
constexpr int64_t kK = 64;  // keys per tile: a score row of floats is four AVX-512 registers

template <typename T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// rows [j0, j1) of x (row stride ld, n wide) as columns: xt[c * kK + (j - j0)]
template <typename T>
void transpose_tile(const T* x, int64_t ld, int64_t n, int64_t j0, int64_t j1, T* xt) {
  for (int64_t j = j0; j < j1; ++j) {
    const T* r = x + j * ld;
    for (int64_t c = 0; c < n; ++c) xt[c * kK + (j - j0)] = r[c];
  }
}

// GCC's vector extension: one 64-byte register on AVX-512, two on AVX2, four SSE ones on the baseline build
template <typename T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <typename T>
using Vec = typename VecOf<T>::type;
template <typename T>
constexpr int64_t kLanes = 64 / sizeof(T);

template <typename T>
[[gnu::always_inline]] inline Vec<T> load(const T* p) {
  Vec<T> v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
[[gnu::always_inline]] inline void store(T* p, Vec<T> v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// out[j] = sum_c a[c] * bt[c * kK + j] for j < kK (out holds kK; the columns past the tile's keys are not read
// later): a row against a transposed tile, the whole score row in registers
template <typename T>
void row_times_tile(const T* __restrict a, const T* __restrict bt, int64_t width, T* __restrict out) {
  constexpr int64_t nv = kK / kLanes<T>;
  Vec<T> acc[nv] = {};
  for (int64_t c = 0; c < width; ++c) {
    const T ac = a[c];
    for (int64_t v = 0; v < nv; ++v) acc[v] += ac * load(bt + c * kK + v * kLanes<T>);
  }
  for (int64_t v = 0; v < nv; ++v) store(out + v * kLanes<T>, acc[v]);
}

// out[j][c] += sum_r w[r * kK + j] * x[r * ldx + c] over r < nr, for j < nj: a tile's weights, transposed, times
// rows; one key's width (NV registers) accumulated over every row before it is added
template <typename T, int NV>
void weights_t_times_rows(const T* w, int64_t nr, int64_t nj, const T* x, int64_t ldx, T* out, int64_t ldo) {
  for (int64_t j = 0; j < nj; ++j) {
    Vec<T> acc[NV] = {};
    for (int64_t r = 0; r < nr; ++r) {
      const T wr = w[r * kK + j];
      for (int v = 0; v < NV; ++v) acc[v] += wr * load(x + r * ldx + v * kLanes<T>);
    }
    for (int v = 0; v < NV; ++v) store(out + j * ldo + v * kLanes<T>, load(out + j * ldo + v * kLanes<T>) + acc[v]);
  }
}

template <typename T>
void weights_t_times_rows(const T* w, int64_t nr, int64_t nj, const T* x, int64_t ldx, int64_t width, T* out, int64_t ldo) {
  const int64_t nv = width / kLanes<T>;
  switch (nv) {  // widths up to 8 registers in registers; the columns past them below
    case 0: break;
    case 1: weights_t_times_rows<T, 1>(w, nr, nj, x, ldx, out, ldo); break;
    case 2: weights_t_times_rows<T, 2>(w, nr, nj, x, ldx, out, ldo); break;
    case 3: weights_t_times_rows<T, 3>(w, nr, nj, x, ldx, out, ldo); break;
    case 4: weights_t_times_rows<T, 4>(w, nr, nj, x, ldx, out, ldo); break;
    case 5: weights_t_times_rows<T, 5>(w, nr, nj, x, ldx, out, ldo); break;
    case 6: weights_t_times_rows<T, 6>(w, nr, nj, x, ldx, out, ldo); break;
    case 7: weights_t_times_rows<T, 7>(w, nr, nj, x, ldx, out, ldo); break;
    default: weights_t_times_rows<T, 8>(w, nr, nj, x, ldx, out, ldo); break;
  }
  const int64_t done = std::min<int64_t>(nv, 8) * kLanes<T>;
  for (int64_t j = 0; j < nj; ++j)
    for (int64_t r = 0; r < nr; ++r) {
      const T wr = w[r * kK + j];
      const T* __restrict xr = x + r * ldx;
      T* __restrict o = out + j * ldo;
#pragma omp simd
      for (int64_t c = done; c < width; ++c) o[c] += wr * xr[c];
    }
}

// acc[c] += sum_j w[j] * x[j0 + j][c] over j < n, four rows of x at a time
template <typename T>
void weighted_rows(const T* __restrict w, const T* x, int64_t ld, int64_t j0, int64_t n, int64_t width, T* __restrict acc) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const T w0 = w[j], w1 = w[j + 1], w2 = w[j + 2], w3 = w[j + 3];
    const T* __restrict x0 = x + (j0 + j) * ld;
    const T* __restrict x1 = x0 + ld;
    const T* __restrict x2 = x1 + ld;
    const T* __restrict x3 = x2 + ld;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) acc[c] += w0 * x0[c] + w1 * x1[c] + w2 * x2[c] + w3 * x3[c];
  }
  for (; j < n; ++j) {
    const T wj = w[j];
    const T* __restrict xj = x + (j0 + j) * ld;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) acc[c] += wj * xj[c];
  }
}

// max(m, s[0..n)), a register of lanes at a time: the scalar chain was the forward's costliest loop (one
// dependent max per key). Lanes ignore NaN as std::max(m, s[j]) does, so the result is the same.
template <typename T>
T row_max(const T* s, int64_t n, T m) {
  int64_t j = 0;
  if (n >= kLanes<T>) {
    Vec<T> v = Vec<T>{} + kNegInf<T>;
    for (; j + kLanes<T> <= n; j += kLanes<T>) {
      Vec<T> x = load(s + j);
      v = x > v ? x : v;
    }
    for (int64_t l = 0; l < kLanes<T>; ++l) m = std::max(m, v[l]);
  }
  for (; j < n; ++j) m = std::max(m, s[j]);
  return m;
}

// How many keys of [j0, j1) query row i sees (causal: those up to i), and its scaled, masked scores in s.
template <typename T>
int64_t score_row(const AttentionProblem& p, int64_t b, int64_t i, int64_t j0, int64_t j1, const T* kt, T* s) {
  const int64_t n = p.causal ? std::min(j1, i + 1) - j0 : j1 - j0;
  if (n <= 0) return 0;
  const T* q = static_cast<const T*>(p.q) + p.q_off[b] + i * p.q_row;
  row_times_tile(q, kt, p.E, s);
  const T scale = T(p.scale);
  for (int64_t j = 0; j < n; ++j) s[j] *= scale;
  if (p.mask_kind == AttentionMask::Bool) {
    const bool* m = static_cast<const bool*>(p.mask) + p.m_off[b] + i * p.m_row + j0 * p.m_col;
    for (int64_t j = 0; j < n; ++j)
      if (!m[j * p.m_col]) s[j] = kNegInf<T>;
  } else if (p.mask_kind == AttentionMask::Float) {
    const T* m = static_cast<const T*>(p.mask) + p.m_off[b] + i * p.m_row + j0 * p.m_col;
    for (int64_t j = 0; j < n; ++j) s[j] += m[j * p.m_col];
  }
  return n;
}

template <typename T>
void forward(const AttentionProblem& p) {
  const int64_t qtiles = (p.L + kQ - 1) / kQ;
#pragma omp parallel if (p.batch * p.L > kQ)
  {
    std::vector<T> kt(size_t(p.E * kK)), s(kK), acc(size_t(kQ * p.Ev)), mx(kQ), sum(kQ);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < p.batch * qtiles; ++task) {
      const int64_t b = task / qtiles, i0 = (task % qtiles) * kQ, i1 = std::min(p.L, i0 + kQ);
      const T* k = static_cast<const T*>(p.k) + p.k_off[b];
      const T* v = static_cast<const T*>(p.v) + p.v_off[b];
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(mx.begin(), mx.end(), kNegInf<T>);
      std::fill(sum.begin(), sum.end(), T(0));
      const int64_t kend = p.causal ? std::min(p.S, i1) : p.S;
      for (int64_t j0 = 0; j0 < kend; j0 += kK) {
        const int64_t j1 = std::min(kend, j0 + kK);
        transpose_tile(k, p.k_row, p.E, j0, j1, kt.data());
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = i - i0, n = score_row(p, b, i, j0, j1, kt.data(), s.data());
          const T m = row_max(s.data(), n, mx[size_t(r)]);
          if (m == kNegInf<T>) continue;  // every key so far masked: nothing to add
          const T alpha = std::exp(mx[size_t(r)] - m);
          T add = 0;
          T* __restrict sr = s.data();
#pragma omp simd reduction(+ : add)
          for (int64_t j = 0; j < n; ++j) {
            sr[j] = std::exp(sr[j] - m);
            add += sr[j];
          }
          sum[size_t(r)] = sum[size_t(r)] * alpha + add;
          mx[size_t(r)] = m;
          T* a = acc.data() + r * p.Ev;
          if (alpha != T(1))
            for (int64_t c = 0; c < p.Ev; ++c) a[c] *= alpha;
          weighted_rows(sr, v, p.v_row, j0, n, p.Ev, a);
        }
      }
      // a row that attends nowhere divides 0 by 0: NaN, as the softmax of all -inf
      T* out = static_cast<T*>(p.out) + (b * p.L + i0) * p.Ev;
      T* lse = static_cast<T*>(p.lse) + b * p.L + i0;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t r = i - i0;
        const T inv = T(1) / sum[size_t(r)];
        for (int64_t c = 0; c < p.Ev; ++c) out[r * p.Ev + c] = acc[size_t(r * p.Ev + c)] * inv;
        lse[r] = mx[size_t(r)] + std::log(sum[size_t(r)]);
      }
    }
  }
}

// One head per task: its dk and dv gather over every query row, so a task owns them whole.
template <typename T>
void backward(const AttentionProblem& p, const AttentionGrads& gr) {
#pragma omp parallel if (p.batch * p.L > kQ)
  {
    std::vector<T> kt(size_t(p.E * kK)), vt(size_t(p.Ev * kK)), pt(kQ * kK), dst(kQ * kK), delta(size_t(p.L));
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < p.batch; ++b) {
      const T* q = static_cast<const T*>(p.q) + p.q_off[b];
      const T* k = static_cast<const T*>(p.k) + p.k_off[b];
      const T* v = static_cast<const T*>(p.v) + p.v_off[b];
      const T* g = static_cast<const T*>(gr.grad) + b * p.L * p.Ev;
      const T* o = static_cast<const T*>(gr.out) + b * p.L * p.Ev;
      const T* lse = static_cast<const T*>(gr.lse) + b * p.L;
      const T* glse = gr.grad_lse ? static_cast<const T*>(gr.grad_lse) + b * p.L : nullptr;
      T* dq = static_cast<T*>(gr.dq) + b * p.L * p.E;
      T* dk = static_cast<T*>(gr.dk) + b * p.S * p.E;
      T* dv = static_cast<T*>(gr.dv) + b * p.S * p.Ev;
      std::fill(dq, dq + p.L * p.E, T(0));
      std::fill(dk, dk + p.S * p.E, T(0));
      std::fill(dv, dv + p.S * p.Ev, T(0));
      // d(loss)/d(score ij) = P_ij (dP_ij - delta_i), delta_i = sum_c g_ic out_ic - d(loss)/d(lse_i)
      for (int64_t i = 0; i < p.L; ++i) {
        T d = 0;
        for (int64_t c = 0; c < p.Ev; ++c) d += g[i * p.Ev + c] * o[i * p.Ev + c];
        delta[size_t(i)] = glse ? d - glse[i] : d;
      }
      const T scale = T(p.scale);
      for (int64_t j0 = 0; j0 < p.S; j0 += kK) {
        const int64_t j1 = std::min(p.S, j0 + kK);
        transpose_tile(k, p.k_row, p.E, j0, j1, kt.data());
        transpose_tile(v, p.v_row, p.Ev, j0, j1, vt.data());
        for (int64_t i0 = p.causal ? j0 / kQ * kQ : 0; i0 < p.L; i0 += kQ) {
          const int64_t i1 = std::min(p.L, i0 + kQ);
          for (int64_t i = i0; i < i1; ++i) {
            T* __restrict pr = pt.data() + (i - i0) * kK;
            T* __restrict dr = dst.data() + (i - i0) * kK;
            const int64_t n = score_row(p, b, i, j0, j1, kt.data(), pr);
            row_times_tile(g + i * p.Ev, vt.data(), p.Ev, dr);
            const T l = lse[i], di = delta[size_t(i)];
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) {
              pr[j] = std::exp(pr[j] - l);           // P
              dr[j] = pr[j] * (dr[j] - di) * scale;  // d(loss)/d(q.k)
            }
            for (int64_t j = std::max<int64_t>(n, 0); j < kK; ++j) pr[j] = dr[j] = T(0);  // keys this row does not see
            if (n > 0) weighted_rows(dr, k, p.k_row, j0, n, p.E, dq + i * p.E);
          }
          weights_t_times_rows(pt.data(), i1 - i0, j1 - j0, g + i0 * p.Ev, p.Ev, p.Ev, dv + j0 * p.Ev, p.Ev);
          weights_t_times_rows(dst.data(), i1 - i0, j1 - j0, q + i0 * p.q_row, p.q_row, p.E, dk + j0 * p.E, p.E);
        }
      }
    }
  }
}

}  // namespace

void attention_forward(DType t, const AttentionProblem& p) {
  if (t == DType::Float64) forward<double>(p);
  else forward<float>(p);
}

void attention_backward(DType t, const AttentionProblem& p, const AttentionGrads& g) {
  if (t == DType::Float64) backward<double>(p, g);
  else backward<float>(p, g);
}

}  // namespace kiln::cpu::KILN_ISA
