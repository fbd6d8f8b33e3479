// The fused attention loops (eager/cpu/attention.h), compiled once per instruction set with the elementwise
// kernels (eager/meson.build) so that the row loops vectorise at the CPU's width and exp calls libmvec.
// A head's scores exist only as one [kQ, kK] tile at a time: the forward keeps a running max and sum per query
// row (the online softmax) and returns log(sum(exp(s))) per row, from which the backward recomputes each tile's
// probabilities instead of reading them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "eager/cpu/attention.h"
#include "eager/cpu/bf16_convert.h"
#include "eager/cpu/isa_kernels.h"
#include "eager/cpu/simd_math.h"
#include "eager/cpu/transpose_copy.h"

namespace kiln::cpu::KILN_ISA {
namespace {

constexpr int64_t kQ = 32;  // query rows per tile
constexpr int64_t kK = 64;  // keys per tile: a score row of floats is four AVX-512 registers

template <typename T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// Rows [r0, r1) of bf16 rows n wide (row stride ld elements, from element offset off) widened into dst, n
// floats a row: a head's or a tile's share, in cache, instead of a float copy of the whole tensor.
inline void widen_rows(const void* base, int64_t off, int64_t ld, int64_t n, int64_t r0, int64_t r1, float* dst) {
  const uint16_t* src = static_cast<const uint16_t*>(base) + off;
  if (ld == n) return bf16_to_f32(src + r0 * ld, dst, (r1 - r0) * n);
  for (int64_t r = r0; r < r1; ++r) bf16_to_f32(src + r * ld, dst + (r - r0) * n, n);
}

inline void narrow_rows(const float* src, void* base, int64_t off, int64_t n) {
  f32_to_bf16(src, static_cast<uint16_t*>(base) + off, n);
}

// rows [j0, j1) of x (row stride ld, n wide) as columns: xt[c * kK + (j - j0)]; float tiles 8x8 in registers
template <typename T>
void transpose_tile(const T* x, int64_t ld, int64_t n, int64_t j0, int64_t j1, T* xt) {
  if constexpr (sizeof(T) == 4) {
    transpose_plane(reinterpret_cast<const uint32_t*>(x + j0 * ld), ld, reinterpret_cast<uint32_t*>(xt), kK, n, j1 - j0);
  } else {
    for (int64_t j = j0; j < j1; ++j) {
      const T* r = x + j * ld;
      for (int64_t c = 0; c < n; ++c) xt[c * kK + (j - j0)] = r[c];
    }
  }
}

// GCC's vector extension at the build's register width: wider vectors than the hardware's are split by
// the compiler through the stack (AVX2 ran the tile products 2x slower than scalar code with 64-byte ones).
#if defined(__AVX512F__)
constexpr int kVecBytes = 64, kVecRegs = 32;
#elif defined(__AVX__)
constexpr int kVecBytes = 32, kVecRegs = 16;
#else
constexpr int kVecBytes = 16, kVecRegs = 16;
#endif
template <typename T>
struct VecOf {
  typedef T type __attribute__((vector_size(kVecBytes)));
};
template <typename T>
using Vec = typename VecOf<T>::type;
template <typename T>
constexpr int64_t kLanes = kVecBytes / sizeof(T);

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

// Rows a register block of NV vectors per row holds: every row reuses the B vectors it loaded, and enough
// independent accumulators keep both FMA ports busy; the accumulators, one row of B and a broadcast fit
// the register file.
template <int NV>
constexpr int kBlockRows = std::max(1, std::min(8, (kVecRegs - NV - 1) / NV));

// c[r][v] (+)= sum_k a[r * ars + k * acs] * b[k * brs + v lanes] for R rows and NV vectors of columns, in registers
template <typename T, int R, int NV>
[[gnu::always_inline]] inline void register_block(int64_t K, const T* __restrict a, int64_t ars, int64_t acs,
                                                  const T* __restrict b, int64_t brs, T* __restrict c, int64_t crs,
                                                  bool accumulate) {
  Vec<T> acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? load(c + r * crs + v * kLanes<T>) : Vec<T>{};
  for (int64_t k = 0; k < K; ++k) {
    Vec<T> bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = load(b + k * brs + v * kLanes<T>);
    for (int r = 0; r < R; ++r) {
      const T ar = a[r * ars + k * acs];
      for (int v = 0; v < NV; ++v) acc[r][v] += ar * bv[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) store(c + r * crs + v * kLanes<T>, acc[r][v]);
}

// The rows a whole block leaves (rem < R) as one block of that height
template <typename T, int NV, int H = kBlockRows<NV> - 1>
void last_rows(int64_t rem, int64_t K, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs, T* c, int64_t crs,
               bool accumulate) {
  if constexpr (H >= 1) {
    if (rem == H) register_block<T, H, NV>(K, a, ars, acs, b, brs, c, crs, accumulate);
    else last_rows<T, NV, H - 1>(rem, K, a, ars, acs, b, brs, c, crs, accumulate);
  }
}

template <typename T, int NV>
void column_block(int64_t M, int64_t K, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs, T* c,
                  int64_t crs, bool accumulate) {
  constexpr int R = kBlockRows<NV>;
  int64_t r = 0;
  for (; r + R <= M; r += R) register_block<T, R, NV>(K, a + r * ars, ars, acs, b, brs, c + r * crs, crs, accumulate);
  last_rows<T, NV>(M - r, K, a + r * ars, ars, acs, b, brs, c + r * crs, crs, accumulate);
}

// C[M, N] (+)= A[M, K] B[K, N], B's rows and C's rows contiguous, A read through strides (a transposed tile
// is the same tile with the strides swapped): the score tiles, the weighted sums of values and every
// gradient of the backward. Up to eight vectors of columns at a time in registers; columns past the last
// whole vector one at a time.
template <typename T>
void tile_gemm(int64_t M, int64_t N, int64_t K, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs, T* c,
               int64_t crs, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  int64_t c0 = 0;
  for (int64_t nv; (nv = (N - c0) / kLanes<T>) > 0; c0 += std::min<int64_t>(nv, 8) * kLanes<T>) {
    const T* bc = b + c0;
    T* cc = c + c0;
    switch (std::min<int64_t>(nv, 8)) {
      case 1: column_block<T, 1>(M, K, a, ars, acs, bc, brs, cc, crs, accumulate); break;
      case 2: column_block<T, 2>(M, K, a, ars, acs, bc, brs, cc, crs, accumulate); break;
      case 3: column_block<T, 3>(M, K, a, ars, acs, bc, brs, cc, crs, accumulate); break;
      case 4: column_block<T, 4>(M, K, a, ars, acs, bc, brs, cc, crs, accumulate); break;
      case 5: column_block<T, 5>(M, K, a, ars, acs, bc, brs, cc, crs, accumulate); break;
      case 6: column_block<T, 6>(M, K, a, ars, acs, bc, brs, cc, crs, accumulate); break;
      case 7: column_block<T, 7>(M, K, a, ars, acs, bc, brs, cc, crs, accumulate); break;
      default: column_block<T, 8>(M, K, a, ars, acs, bc, brs, cc, crs, accumulate); break;
    }
  }
  for (int64_t r = 0; r < M; ++r)
    for (int64_t col = c0; col < N; ++col) {
      T sum = accumulate ? c[r * crs + col] : T(0);
      for (int64_t k = 0; k < K; ++k) sum += a[r * ars + k * acs] * b[k * brs + col];
      c[r * crs + col] = sum;
    }
}

// A vector's lanes folded in halves (log2 steps) rather than one dependent scalar op per lane, each step a
// shuffle at the full width in registers: memcpy'd halves went through the stack, and those stores and
// narrower reloads cost as much per score row as the row's exps.
template <typename T, int S, size_t... I>
[[gnu::always_inline]] inline Vec<T> rotate(Vec<T> v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, int((I + S) % kLanes<T>)...);
}

template <typename T, int S = int(kLanes<T>) / 2, typename F>
[[gnu::always_inline]] inline T fold(Vec<T> v, F f) {
  if constexpr (S == 0) {
    return v[0];
  } else {
    return fold<T, S / 2>(f(v, rotate<T, S>(v, std::make_index_sequence<size_t(kLanes<T>)>{})), f);
  }
}

// max(m, s[0..n)), n a whole number of vectors. Lanes ignore NaN as std::max(m, s[j]) does, so the result
// is the same.
template <typename T>
T row_max(const T* s, int64_t n, T m) {
  if (n == 0) return m;
  Vec<T> v = Vec<T>{} + kNegInf<T>;
  for (int64_t j = 0; j < n; j += kLanes<T>) {
    Vec<T> x = load(s + j);
    v = x > v ? x : v;
  }
  return std::max(m, fold<T>(v, [](auto a, auto b) { return a > b ? a : b; }));
}

// sum(s[0..n)), n a whole number of vectors
template <typename T>
T row_sum(const T* s, int64_t n) {
  Vec<T> v = {};
  for (int64_t j = 0; j < n; j += kLanes<T>) v += load(s + j);
  return fold<T>(v, [](auto a, auto b) { return a + b; });
}

// exp of a softmax row's shifted scores (x <= 0 up to rounding, -inf for masked keys) a vector at a time, inline:
// libmvec's call per vector was a sixth of the attention's time at head dim 32. Cody-Waite reduction by ln 2 and
// Cephes' degree-5 polynomial, within 1.01 ulp of exp over [-86.4, 1]; below -86.5 (e^x < 3e-38) it gives 0, NaN stays NaN. Double
// rows keep std::exp.
template <typename T>
[[gnu::always_inline]] inline Vec<T> softmax_exp(Vec<T> x) {
  if constexpr (sizeof(T) == 4) {
    typedef int32_t Bits __attribute__((vector_size(kVecBytes)));
    constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer held in the low bits
    const Vec<T> t = x * 1.44269504088896341f + kMagic;
    const Vec<T> n = t - kMagic;
    Vec<T> r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    Vec<T> p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const Vec<T> y = p * (r * r) + r + 1.0f;
    const Bits scaled = (Bits)y + (((Bits)t - (Bits)(Vec<T>{} + kMagic)) << 23);
    const Vec<T> e = x < -86.5f ? Vec<T>{} : (Vec<T>)scaled;
    return x != x ? x : e;
  } else {
    for (int64_t l = 0; l < kLanes<T>; ++l) x[l] = std::exp(x[l]);
    return x;
  }
}

// The keys of [j0, j1) query row i sees (causal: those up to i); its scores in s, the products of q and k
// already there, are scaled and masked, and -inf past them up to a whole number of vectors (returned), so the
// softmax's loops run on whole vectors only.
struct RowKeys {
  int64_t n = 0, padded = 0;
};

template <typename T>
RowKeys finish_score_row(const AttentionProblem& p, int64_t b, int64_t i, int64_t j0, int64_t j1, T* s) {
  const int64_t n = p.causal ? std::min(j1, i + 1) - j0 : j1 - j0;
  if (n <= 0) return {};
  const int64_t padded = (n + kLanes<T> - 1) / kLanes<T> * kLanes<T>;  // <= kK
  const T scale = T(p.scale);
  for (int64_t j = 0; j < padded; ++j) s[j] *= scale;
  if (p.mask_kind == AttentionMask::Bool) {
    const bool* m = static_cast<const bool*>(p.mask) + p.m_off[b] + i * p.m_row + j0 * p.m_col;
    for (int64_t j = 0; j < n; ++j)
      if (!m[j * p.m_col]) s[j] = kNegInf<T>;
  } else if (p.mask_kind == AttentionMask::Float) {
    const T* m = static_cast<const T*>(p.mask) + p.m_off[b] + i * p.m_row + j0 * p.m_col;
    for (int64_t j = 0; j < n; ++j) s[j] += m[j * p.m_col];
  }
  std::fill(s + n, s + padded, kNegInf<T>);
  return {n, padded};
}

// The keys of [j0, j1) that some row of [i0, i1) sees: beyond them every row's weights are zero.
inline int64_t keys_seen(const AttentionProblem& p, int64_t i1, int64_t j0, int64_t j1) {
  return p.causal ? std::max<int64_t>(0, std::min(j1, i1) - j0) : j1 - j0;
}

// A query tile against a key tile: one register-blocked product for the scores of all its rows, the online
// softmax per row, then one product of the tile's weights and the values.
template <typename T>
void forward(const AttentionProblem& p) {
  const int64_t qtiles = (p.L + kQ - 1) / kQ;
#pragma omp parallel if (p.batch * p.L > kQ)
  {
    std::vector<T> kt(size_t(p.E * kK)), s(kQ * kK), acc(size_t(kQ * p.Ev)), mx(kQ), sum(kQ);
    const bool bf16 = std::is_same_v<T, float> && p.bf16;
    std::vector<T> qw(bf16 ? size_t(kQ * p.E) : 0), kw(bf16 ? size_t(p.S * p.E) : 0), vw(bf16 ? size_t(p.S * p.Ev) : 0),
        ow(bf16 ? size_t(kQ * p.Ev) : 0);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < p.batch * qtiles; ++task) {
      const int64_t b = task / qtiles, i0 = (task % qtiles) * kQ, i1 = std::min(p.L, i0 + kQ), nr = i1 - i0;
      const int64_t kend = p.causal ? std::min(p.S, i1) : p.S;
      // the tile's query rows (from row i0), the keys and values it reads
      const T *qi = qw.data(), *k = kw.data(), *v = vw.data();
      int64_t q_row = p.E, k_row = p.E, v_row = p.Ev;
      if (!bf16) {
        qi = static_cast<const T*>(p.q) + p.q_off[b] + i0 * p.q_row;
        k = static_cast<const T*>(p.k) + p.k_off[b];
        v = static_cast<const T*>(p.v) + p.v_off[b];
        q_row = p.q_row, k_row = p.k_row, v_row = p.v_row;
      } else if constexpr (std::is_same_v<T, float>) {
        widen_rows(p.q, p.q_off[b], p.q_row, p.E, i0, i1, qw.data());
        widen_rows(p.k, p.k_off[b], p.k_row, p.E, 0, kend, kw.data());
        widen_rows(p.v, p.v_off[b], p.v_row, p.Ev, 0, kend, vw.data());
      }
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(mx.begin(), mx.end(), kNegInf<T>);
      std::fill(sum.begin(), sum.end(), T(0));
      for (int64_t j0 = 0; j0 < kend; j0 += kK) {
        const int64_t j1 = std::min(kend, j0 + kK), seen = keys_seen(p, i1, j0, j1);
        transpose_tile(k, k_row, p.E, j0, j1, kt.data());
        tile_gemm(nr, kK, p.E, qi, q_row, int64_t(1), kt.data(), kK, s.data(), kK, false);
        for (int64_t r = 0; r < nr; ++r) {
          T* __restrict sr = s.data() + r * kK;
          const RowKeys keys = finish_score_row(p, b, i0 + r, j0, j1, sr);
          const T m = row_max(sr, keys.padded, mx[size_t(r)]);
          if (m == kNegInf<T>) {  // every key so far masked: nothing to add
            std::fill(sr, sr + seen, T(0));
            continue;
          }
          const T alpha = std::exp(mx[size_t(r)] - m);
          for (int64_t j = 0; j < keys.padded; j += kLanes<T>)  // 0 past the row's keys
            store(sr + j, softmax_exp<T>(load(sr + j) - m));
          const T add = row_sum(sr, keys.padded);
          if (keys.padded < seen) std::fill(sr + keys.padded, sr + seen, T(0));
          sum[size_t(r)] = sum[size_t(r)] * alpha + add;
          mx[size_t(r)] = m;
          if (alpha != T(1)) {
            T* a = acc.data() + r * p.Ev;
            for (int64_t c = 0; c < p.Ev; ++c) a[c] *= alpha;
          }
        }
        tile_gemm(nr, p.Ev, seen, s.data(), kK, int64_t(1), v + j0 * v_row, v_row, acc.data(), p.Ev, true);
      }
      // a row that attends nowhere divides 0 by 0: NaN, as the softmax of all -inf
      T* out = bf16 ? ow.data() : static_cast<T*>(p.out) + (b * p.L + i0) * p.Ev;
      T* lse = static_cast<T*>(p.lse) + b * p.L + i0;
      for (int64_t r = 0; r < nr; ++r) {
        const T inv = T(1) / sum[size_t(r)];
        for (int64_t c = 0; c < p.Ev; ++c) out[r * p.Ev + c] = acc[size_t(r * p.Ev + c)] * inv;
        lse[r] = mx[size_t(r)] + std::log(sum[size_t(r)]);
      }
      if constexpr (std::is_same_v<T, float>) {
        if (bf16) narrow_rows(ow.data(), p.out, (b * p.L + i0) * p.Ev, nr * p.Ev);
      }
    }
  }
}

// One head per task: its dk and dv gather over every query row, so a task owns them whole. Per pair of tiles
// the scores and d(loss)/d(p) come from two products, and dq, dk and dv gain one product each.
template <typename T>
void backward(const AttentionProblem& p, const AttentionGrads& gr) {
#pragma omp parallel if (p.batch * p.L > kQ)
  {
    std::vector<T> kt(size_t(p.E * kK)), vt(size_t(p.Ev * kK)), pt(kQ * kK), dst(kQ * kK), delta(size_t(p.L));
    // bf16: the head's operands widened and its gradients summed in float, rounded once at the end
    const bool bf16 = std::is_same_v<T, float> && p.bf16;
    auto buf = [&](int64_t rows, int64_t n) { return std::vector<T>(bf16 ? size_t(rows * n) : 0); };
    std::vector<T> qw = buf(p.L, p.E), kw = buf(p.S, p.E), vw = buf(p.S, p.Ev), gw = buf(p.L, p.Ev), ow = buf(p.L, p.Ev),
                   dqw = buf(p.L, p.E), dkw = buf(p.S, p.E), dvw = buf(p.S, p.Ev);
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < p.batch; ++b) {
      const T* lse = static_cast<const T*>(gr.lse) + b * p.L;
      const T* glse = gr.grad_lse ? static_cast<const T*>(gr.grad_lse) + b * p.L : nullptr;
      const T *q = qw.data(), *k = kw.data(), *v = vw.data(), *g = gw.data(), *o = ow.data();
      T *dq = dqw.data(), *dk = dkw.data(), *dv = dvw.data();
      int64_t q_row = p.E, k_row = p.E, v_row = p.Ev;
      if (!bf16) {
        q = static_cast<const T*>(p.q) + p.q_off[b];
        k = static_cast<const T*>(p.k) + p.k_off[b];
        v = static_cast<const T*>(p.v) + p.v_off[b];
        g = static_cast<const T*>(gr.grad) + b * p.L * p.Ev;
        o = static_cast<const T*>(gr.out) + b * p.L * p.Ev;
        dq = static_cast<T*>(gr.dq) + b * p.L * p.E;
        dk = static_cast<T*>(gr.dk) + b * p.S * p.E;
        dv = static_cast<T*>(gr.dv) + b * p.S * p.Ev;
        q_row = p.q_row, k_row = p.k_row, v_row = p.v_row;
      } else if constexpr (std::is_same_v<T, float>) {
        widen_rows(p.q, p.q_off[b], p.q_row, p.E, 0, p.L, qw.data());
        widen_rows(p.k, p.k_off[b], p.k_row, p.E, 0, p.S, kw.data());
        widen_rows(p.v, p.v_off[b], p.v_row, p.Ev, 0, p.S, vw.data());
        widen_rows(gr.grad, b * p.L * p.Ev, p.Ev, p.Ev, 0, p.L, gw.data());
        widen_rows(gr.out, b * p.L * p.Ev, p.Ev, p.Ev, 0, p.L, ow.data());
      }
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
        transpose_tile(k, k_row, p.E, j0, j1, kt.data());
        transpose_tile(v, v_row, p.Ev, j0, j1, vt.data());
        for (int64_t i0 = p.causal ? j0 / kQ * kQ : 0; i0 < p.L; i0 += kQ) {
          const int64_t i1 = std::min(p.L, i0 + kQ), nr = i1 - i0, seen = keys_seen(p, i1, j0, j1);
          if (seen == 0) continue;
          tile_gemm(nr, kK, p.E, q + i0 * q_row, q_row, int64_t(1), kt.data(), kK, pt.data(), kK, false);
          tile_gemm(nr, kK, p.Ev, g + i0 * p.Ev, p.Ev, int64_t(1), vt.data(), kK, dst.data(), kK, false);
          for (int64_t r = 0; r < nr; ++r) {
            T* __restrict pr = pt.data() + r * kK;
            T* __restrict dr = dst.data() + r * kK;
            const int64_t i = i0 + r;
            const RowKeys keys = finish_score_row(p, b, i, j0, j1, pr);
            const T l = lse[i], di = delta[size_t(i)];
            for (int64_t j = 0; j < keys.padded; j += kLanes<T>) {
              const Vec<T> pv = softmax_exp<T>(load(pr + j) - l);  // P
              store(pr + j, pv);
              store(dr + j, pv * (load(dr + j) - di) * scale);  // d(loss)/d(q.k)
            }
            for (int64_t j = keys.n; j < seen; ++j) pr[j] = dr[j] = T(0);  // keys this row does not see
          }
          tile_gemm(nr, p.E, seen, dst.data(), kK, int64_t(1), k + j0 * k_row, k_row, dq + i0 * p.E, p.E, true);
          tile_gemm(seen, p.Ev, nr, pt.data(), int64_t(1), kK, g + i0 * p.Ev, p.Ev, dv + j0 * p.Ev, p.Ev, true);
          tile_gemm(seen, p.E, nr, dst.data(), int64_t(1), kK, q + i0 * q_row, q_row, dk + j0 * p.E, p.E, true);
        }
      }
      if constexpr (std::is_same_v<T, float>) {
        if (bf16) {
          narrow_rows(dq, gr.dq, b * p.L * p.E, p.L * p.E);
          narrow_rows(dk, gr.dk, b * p.S * p.E, p.S * p.E);
          narrow_rows(dv, gr.dv, b * p.S * p.Ev, p.S * p.Ev);
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
