// The fused attention loops (eager/cpu/attention.h), compiled once per instruction set with the elementwise
// kernels (eager/meson.build) so that the loops vectorise at the CPU's width.
// A head's scores exist only as one tile at a time, held transposed — a key per row, a query per lane — so the
// softmax's per-query max, exp and sum are lane-wise operations over the tile's rows, with no fold across
// lanes and no scalar step per query (at a GPT's 64 keys those cost more than the tile's products did). The
// forward keeps a running max and sum per query (the online softmax) and returns log(sum(exp(s))) per query,
// from which the backward recomputes each tile's probabilities instead of reading them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "eager/cpu/attention.h"
#include "eager/cpu/attention_amx.h"
#include "eager/cpu/bf16_convert.h"
#include "eager/cpu/isa_kernels.h"
#include "eager/cpu/simd_math.h"
#include "eager/cpu/transpose_copy.h"

namespace kiln::cpu::KILN_ISA {
namespace {

constexpr int64_t kQ = 32;  // queries per tile: the lanes of a score row (two AVX-512 registers of floats)
constexpr int64_t kK = 64;  // keys per tile: the rows of a score tile

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

// rows [j0, j1) of x (row stride ld, n wide) as columns: xt[c * ldt + (j - j0)], then zeros up to column
// `padded` - j0 (the lanes past the last row of a tile); float tiles 8x8 in registers
template <typename T>
void transpose_tile(const T* x, int64_t ld, int64_t n, int64_t j0, int64_t j1, T* xt, int64_t ldt, int64_t padded) {
  if constexpr (sizeof(T) == 4) {
    transpose_plane(reinterpret_cast<const uint32_t*>(x + j0 * ld), ld, reinterpret_cast<uint32_t*>(xt), ldt, n, j1 - j0);
  } else {
    for (int64_t j = j0; j < j1; ++j) {
      const T* r = x + j * ld;
      for (int64_t c = 0; c < n; ++c) xt[c * ldt + (j - j0)] = r[c];
    }
  }
  for (int64_t c = 0; c < n; ++c) std::fill(xt + c * ldt + (j1 - j0), xt + c * ldt + (padded - j0), T(0));
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

// log of a query's sum of weights, a vector at a time (a scalar logf per query was a tenth of the forward):
// the sum is 0 (every key masked: -inf), at least 1 (its largest weight is e^0), inf or NaN. Exponent and
// mantissa apart, Cephes' logf polynomial on [sqrt(1/2), sqrt(2)), within 1 ulp; double rows keep std::log.
template <typename T>
[[gnu::always_inline]] inline Vec<T> sum_log(Vec<T> x) {
  if constexpr (sizeof(T) == 4) {
    typedef int32_t Bits __attribute__((vector_size(kVecBytes)));
    const Bits bits = (Bits)x;
    Bits e = ((bits >> 23) & 0xff) - 126;
    Vec<T> m = (Vec<T>)((bits & 0x007fffff) | 0x3f000000);  // x = m * 2^e, m in [0.5, 1)
    const Bits small = m < 0.707106781186547524f;
    e += small;  // -1 where the mantissa doubles
    m = (small ? m + m : m) - 1.0f;
    const Vec<T> z = m * m;
    Vec<T> y = m * 7.0376836292e-2f - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    const Vec<T> fe = __builtin_convertvector(e, Vec<T>);
    y = y * m * z + fe * -2.12194440e-4f - 0.5f * z;
    const Vec<T> r = m + y + fe * 0.693359375f;
    const Vec<T> ninf = Vec<T>{} + kNegInf<T>;
    return x == 0 ? ninf : (x - x != 0 ? x + x : r);  // inf and NaN through x + x
  } else {
    for (int64_t l = 0; l < kLanes<T>; ++l) x[l] = std::log(x[l]);
    return x;
  }
}

// Key jg's scaled scores for the lanes' queries r0, r0 + 1, ... (rows: the same as numbers), masked: causal
// above the diagonal, a bool mask's false and a float mask's values read per lane (lanes at or past
// `end`, a tile's padding, read nothing).
template <typename T>
[[gnu::always_inline]] inline Vec<T> mask_scores(const AttentionProblem& p, int64_t b, Vec<T> x, Vec<T> rows, int64_t r0,
                                                 int64_t end, int64_t jg) {
  if (p.causal) x = Vec<T>{} + T(jg) > rows ? Vec<T>{} + kNegInf<T> : x;
  if (p.mask_kind == AttentionMask::Bool) {
    const bool* m = static_cast<const bool*>(p.mask) + p.m_off[b] + jg * p.m_col;
    for (int64_t l = 0; l < kLanes<T> && r0 + l < end; ++l)
      if (!m[(r0 + l) * p.m_row]) x[l] = kNegInf<T>;
  } else if (p.mask_kind == AttentionMask::Float) {
    const T* m = static_cast<const T*>(p.mask) + p.m_off[b] + jg * p.m_col;
    for (int64_t l = 0; l < kLanes<T> && r0 + l < end; ++l) x[l] += m[(r0 + l) * p.m_row];
  }
  return x;
}

template <typename T>
Vec<T> lane_numbers() {
  Vec<T> v;
  for (int64_t l = 0; l < kLanes<T>; ++l) v[l] = T(l);
  return v;
}

bool even_rows(const void* base, const int64_t* off, int64_t row, int64_t batch) {
  if (row % 2 || reinterpret_cast<uintptr_t>(base) % 4) return false;
  for (int64_t b = 0; b < batch; ++b)
    if (off[b] % 2) return false;
  return true;
}

// bf16 heads whose rows split into pairs (4-byte aligned, rows 16 wide) take their products on AMX
// (attention_amx.h) where the CPU has it, in the AVX-512 build (whose tiles are 16 lanes wide); elsewhere they
// are widened to float a head at a time.
bool bf16_pairs(const AttentionProblem& p, const AttentionGrads* g) {
  // q.k and v.grad sum over a row's pairs read in place: one AMX step of at most 16 or whole steps of 16
  auto fits = [](int64_t w) { return w % 16 == 0 && (w <= 32 || w % 32 == 0); };
  if (kLanes<float> != 16 || !p.bf16 || !fits(p.E) || !fits(p.Ev) || !amx_bf16::available()) return false;
  return even_rows(p.q, p.q_off, p.q_row, p.batch) && even_rows(p.k, p.k_off, p.k_row, p.batch) &&
         even_rows(p.v, p.v_off, p.v_row, p.batch) &&
         (!g || (even_rows(g->grad, g->grad_rows.off, g->grad_rows.row, p.batch) &&
                 even_rows(g->out, g->out_rows.off, g->out_rows.row, p.batch)));
}

// The pairs an AMX product sums over (amx_bf16::tile), packed operands padded with zero pairs to it
inline int64_t amx_pairs(int64_t k2) { return k2 <= 16 ? k2 : (k2 + 15) / 16 * 16; }

// rows [from, to) of n pairs, zeroed
inline void zero_pairs(uint32_t* x, int64_t from, int64_t to, int64_t n) {
  if (to > from) std::fill(x + from * n, x + to * n, 0u);
}

// d[l] = sum over n rows of a[r][l] . b[r][l] for lanes l < width, each a pair of bf16 (exact as floats): the
// backward's delta by query from grad and out as feature pairs by lane
inline void pair_dots(const uint32_t* a, const uint32_t* b, int64_t n, int64_t width, float* d) {
  constexpr int64_t W = kLanes<float>;
  for (int64_t c0 = 0; c0 < width; c0 += W) {
    Vec<float> acc{};
    for (int64_t r = 0; r < n; ++r) {
      const Vec<uint32_t> x = load(a + r * kQ + c0), y = load(b + r * kQ + c0);
      acc += (Vec<float>)(x << 16) * (Vec<float>)(y << 16) + (Vec<float>)(x & 0xffff0000u) * (Vec<float>)(y & 0xffff0000u);
    }
    store(d + c0, acc);
  }
}

// bf16 rows from element offset off viewed as rows of pairs
inline const uint32_t* pairs_at(const void* base, int64_t off) {
  return reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(base) + off);
}

// A tile of queries against each tile of keys it sees: one register-blocked product for the transposed
// scores, the online softmax lane-wise down the key rows, then one product of the values and the weights
// into the transposed accumulator.
template <typename T>
void forward(const AttentionProblem& p) {
  constexpr int64_t W = kLanes<T>;
  const int64_t qtiles = (p.L + kQ - 1) / kQ;
  const bool bf16 = std::is_same_v<T, float> && p.bf16, pairs = std::is_same_v<T, float> && bf16_pairs(p, nullptr);
  const bool widen = bf16 && !pairs;
#pragma omp parallel if (p.batch * p.L > kQ)
  {
    std::vector<T> qt(pairs ? 0 : size_t(p.E * kQ)), st(kK * kQ), acc(size_t(p.Ev * kQ)), mx(kQ), sum(kQ), lt(kQ);
    std::vector<T> qw(widen ? size_t(kQ * p.E) : 0), kw(widen ? size_t(p.S * p.E) : 0), vw(widen ? size_t(p.S * p.Ev) : 0),
        ow(bf16 ? size_t(kQ * p.Ev) : 0);
    // pairs: the tile's queries as feature pairs by lane, the values as key pairs (vp) and transposed (vt, a
    // row per feature), a tile's weights as key pairs by lane
    const int64_t vt_ld = amx_pairs((p.S + 1) / 2);
    std::vector<uint32_t> qp(pairs ? size_t(p.E / 2 * kQ) : 0), vp(pairs ? size_t(vt_ld * p.Ev) : 0),
        vt(pairs ? size_t(vt_ld * p.Ev) : 0), pp(pairs ? size_t(kK / 2 * kQ) : 0);
    const Vec<T> lanes = lane_numbers<T>();
    const T scale = T(p.scale);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < p.batch * qtiles; ++task) {
      const int64_t b = task / qtiles, i0 = (task % qtiles) * kQ, i1 = std::min(p.L, i0 + kQ), nr = i1 - i0;
      const int64_t nv = (nr + W - 1) / W, width = nv * W;
      const int64_t kend = p.causal ? std::min(p.S, i1) : p.S;
      // the tile's query rows (from row i0), the keys and values it reads
      const T *qi = qw.data(), *k = kw.data(), *v = vw.data();
      int64_t q_row = p.E, k_row = p.E, v_row = p.Ev;
      if (!bf16) {
        qi = static_cast<const T*>(p.q) + p.q_off[b] + i0 * p.q_row;
        k = static_cast<const T*>(p.k) + p.k_off[b];
        v = static_cast<const T*>(p.v) + p.v_off[b];
        q_row = p.q_row, k_row = p.k_row, v_row = p.v_row;
      } else if (pairs) {
        transpose_tile(pairs_at(p.q, p.q_off[b]), p.q_row / 2, p.E / 2, i0, i1, qp.data(), kQ, i0 + width);
        amx_bf16::pair_rows(static_cast<const uint16_t*>(p.v) + p.v_off[b], p.v_row, kend, p.Ev, vp.data(), p.Ev);
        transpose_plane(vp.data(), p.Ev, vt.data(), vt_ld, p.Ev, (kend + 1) / 2);
        for (int64_t c = 0; c < p.Ev; ++c) zero_pairs(vt.data() + c * vt_ld, (kend + 1) / 2, vt_ld, 1);
      } else if constexpr (std::is_same_v<T, float>) {
        widen_rows(p.q, p.q_off[b], p.q_row, p.E, i0, i1, qw.data());
        widen_rows(p.k, p.k_off[b], p.k_row, p.E, 0, kend, kw.data());
        widen_rows(p.v, p.v_off[b], p.v_row, p.Ev, 0, kend, vw.data());
      }
      if (!pairs) transpose_tile(qi, q_row, p.E, 0, nr, qt.data(), kQ, width);
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(mx.begin(), mx.end(), kNegInf<T>);
      std::fill(sum.begin(), sum.end(), T(0));
      for (int64_t j0 = 0; j0 < kend; j0 += kK) {
        const int64_t nk = std::min(kend, j0 + kK) - j0;
        if constexpr (std::is_same_v<T, float>) {
          if (pairs)
            amx_bf16::tile(nk, width, p.E / 2, pairs_at(p.k, p.k_off[b] + j0 * p.k_row), p.k_row / 2, qp.data(), kQ,
                           st.data(), kQ, false);
        }
        if (!pairs) tile_gemm(nk, width, p.E, k + j0 * k_row, k_row, int64_t(1), qt.data(), kQ, st.data(), kQ, false);
        for (int64_t c0 = 0; c0 < width; c0 += W) {
          const Vec<T> rows = lanes + T(i0 + c0);
          const Vec<T> old = load(mx.data() + c0);
          Vec<T> m = old;
          for (int64_t j = 0; j < nk; ++j) {
            T* sj = st.data() + j * kQ + c0;
            const Vec<T> x = mask_scores<T>(p, b, load(sj) * scale, rows, i0 + c0, i1, j0 + j);
            store(sj, x);
            m = x > m ? x : m;  // NaN ignored, as std::max(m, x)
          }
          // a query whose keys so far are all masked: weights exp(-inf - 0) = 0, its sum stays 0
          const Vec<T> shift = m == kNegInf<T> ? Vec<T>{} : m;
          Vec<T> add = {};
          for (int64_t j = 0; j < nk; ++j) {
            T* sj = st.data() + j * kQ + c0;
            const Vec<T> e = softmax_exp<T>(load(sj) - shift);
            store(sj, e);
            add += e;
          }
          const Vec<T> alpha = softmax_exp<T>(old - shift);  // 0 where old is -inf
          store(sum.data() + c0, load(sum.data() + c0) * alpha + add);
          store(mx.data() + c0, m);
          for (int64_t c = 0; c < p.Ev; ++c) store(acc.data() + c * kQ + c0, load(acc.data() + c * kQ + c0) * alpha);
        }
        if constexpr (std::is_same_v<T, float>) {
          if (pairs) {
            const int64_t kpairs = amx_pairs((nk + 1) / 2);
            amx_bf16::pair_rows(st.data(), kQ, nk, width, pp.data(), kQ);
            zero_pairs(pp.data(), (nk + 1) / 2, kpairs, kQ);
            amx_bf16::tile(p.Ev, width, kpairs, vt.data() + j0 / 2, vt_ld, pp.data(), kQ, acc.data(), kQ, true);
          }
        }
        if (!pairs) tile_gemm(p.Ev, width, nk, v + j0 * v_row, int64_t(1), v_row, st.data(), kQ, acc.data(), kQ, true);
      }
      // a query that attends nowhere divides 0 by 0: NaN, as the softmax of all -inf
      const int64_t o_off = p.out_rows.off[b] + i0 * p.out_rows.row, o_row = bf16 ? p.Ev : p.out_rows.row;
      T* out = bf16 ? ow.data() : static_cast<T*>(p.out) + o_off;
      T* lse = static_cast<T*>(p.lse) + b * p.L + i0;
      if constexpr (sizeof(T) == 4) {  // the transposed sums into rows, then each row scaled
        transpose_plane(reinterpret_cast<const uint32_t*>(acc.data()), kQ, reinterpret_cast<uint32_t*>(out), o_row, nr, p.Ev);
        for (int64_t r = 0; r < nr; ++r) {
          const T inv = T(1) / sum[size_t(r)];
          for (int64_t c = 0; c < p.Ev; ++c) out[r * o_row + c] *= inv;
        }
      } else {
        for (int64_t r = 0; r < nr; ++r) {
          const T inv = T(1) / sum[size_t(r)];
          for (int64_t c = 0; c < p.Ev; ++c) out[r * o_row + c] = acc[size_t(c * kQ + r)] * inv;
        }
      }
      for (int64_t c0 = 0; c0 < width; c0 += W) store(lt.data() + c0, load(mx.data() + c0) + sum_log<T>(load(sum.data() + c0)));
      std::copy(lt.begin(), lt.begin() + nr, lse);
      if constexpr (std::is_same_v<T, float>) {
        if (bf16)
          for (int64_t r = 0; r < nr; ++r) narrow_rows(ow.data() + r * p.Ev, p.out, o_off + r * p.out_rows.row, p.Ev);
      }
    }
    if (pairs) amx_bf16::release();
  }
}

// One head per task: its dk and dv gather over every query, so a task owns them whole. Per pair of tiles the
// transposed scores and d(loss)/d(p) come from two products, and dq, dk and dv gain one product each.
template <typename T>
void backward(const AttentionProblem& p, const AttentionGrads& gr) {
  constexpr int64_t W = kLanes<T>;
  const bool bf16 = std::is_same_v<T, float> && p.bf16, pairs = std::is_same_v<T, float> && bf16_pairs(p, &gr);
#pragma omp parallel if (p.batch * p.L > kQ)
  {
    std::vector<T> qt(pairs ? 0 : size_t(p.E * kQ)), gt(pairs ? 0 : size_t(p.Ev * kQ)), st(kK * kQ), dst(kK * kQ),
        delta(size_t(p.L + kQ)), lt(kQ), dt(kQ);
    // bf16: the head's gradients summed in float and rounded once at the end; its operands widened, or read as
    // pairs
    auto buf = [&](bool use, int64_t rows, int64_t n) { return std::vector<T>(use ? size_t(rows * n) : 0); };
    const bool widen = bf16 && !pairs;
    std::vector<T> qw = buf(widen, p.L, p.E), kw = buf(widen, p.S, p.E), vw = buf(widen, p.S, p.Ev), gw = buf(widen, p.L, p.Ev),
                   ow = buf(widen, p.L, p.Ev), dqw = buf(bf16, p.L, p.E), dkw = buf(bf16, p.S, p.E), dvw = buf(bf16, p.S, p.Ev);
    // pairs: the query tile's q, grad and out as feature pairs by lane (qp, gp, op) and q and grad as query
    // pairs (qq, gq), the keys as key pairs (kp), a tile's score gradients as key pairs (sp), its weights and
    // score gradients as query pairs (pq, sq)
    auto pbuf = [&](int64_t rows, int64_t n) { return std::vector<uint32_t>(pairs ? size_t(rows * n) : 0); };
    std::vector<uint32_t> qp = pbuf(p.E / 2, kQ), gp = pbuf(p.Ev / 2, kQ), op = pbuf(p.Ev / 2, kQ), qq = pbuf(kQ / 2, p.E), gq = pbuf(kQ / 2, p.Ev),
                          kp = pbuf((p.S + 1) / 2, p.E), sp = pbuf(kK / 2, kQ), pq = pbuf(kK, kQ / 2), sq = pbuf(kK, kQ / 2);
    // and the keys transposed (a row per feature), the query tile's dq transposed (a row per feature)
    const int64_t kt_ld = amx_pairs((p.S + 1) / 2);
    std::vector<uint32_t> kt = pbuf(p.E, kt_ld);
    std::vector<float> dqt(pairs ? size_t(p.E * kQ) : 0);
    const Vec<T> lanes = lane_numbers<T>();
    const T scale = T(p.scale);
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < p.batch; ++b) {
      const T* lse = static_cast<const T*>(gr.lse) + b * p.L;
      const T* glse = gr.grad_lse ? static_cast<const T*>(gr.grad_lse) + b * p.L : nullptr;
      const T *q = qw.data(), *k = kw.data(), *v = vw.data(), *g = gw.data(), *o = ow.data();
      T *dq = dqw.data(), *dk = dkw.data(), *dv = dvw.data();
      int64_t q_row = p.E, k_row = p.E, v_row = p.Ev, g_row = p.Ev, o_row = p.Ev, dq_row = p.E, dk_row = p.E, dv_row = p.Ev;
      if (!bf16) {
        q = static_cast<const T*>(p.q) + p.q_off[b];
        k = static_cast<const T*>(p.k) + p.k_off[b];
        v = static_cast<const T*>(p.v) + p.v_off[b];
        g = static_cast<const T*>(gr.grad) + gr.grad_rows.off[b];
        o = static_cast<const T*>(gr.out) + gr.out_rows.off[b];
        dq = static_cast<T*>(gr.dq) + gr.dq_rows.off[b];
        dk = static_cast<T*>(gr.dk) + gr.dk_rows.off[b];
        dv = static_cast<T*>(gr.dv) + gr.dv_rows.off[b];
        q_row = p.q_row, k_row = p.k_row, v_row = p.v_row, g_row = gr.grad_rows.row, o_row = gr.out_rows.row;
        dq_row = gr.dq_rows.row, dk_row = gr.dk_rows.row, dv_row = gr.dv_rows.row;
      } else if constexpr (std::is_same_v<T, float>) {
        if (pairs) {
          amx_bf16::pair_rows(static_cast<const uint16_t*>(p.k) + p.k_off[b], p.k_row, p.S, p.E, kp.data(), p.E);
          transpose_plane(kp.data(), p.E, kt.data(), kt_ld, p.E, (p.S + 1) / 2);  // the padding stays zero
        } else {
          widen_rows(p.q, p.q_off[b], p.q_row, p.E, 0, p.L, qw.data());
          widen_rows(p.k, p.k_off[b], p.k_row, p.E, 0, p.S, kw.data());
          widen_rows(p.v, p.v_off[b], p.v_row, p.Ev, 0, p.S, vw.data());
          widen_rows(gr.grad, gr.grad_rows.off[b], gr.grad_rows.row, p.Ev, 0, p.L, gw.data());
          widen_rows(gr.out, gr.out_rows.off[b], gr.out_rows.row, p.Ev, 0, p.L, ow.data());
        }
      }
      for (int64_t i = 0; i < p.L; ++i) std::fill_n(dq + i * dq_row, p.E, T(0));
      for (int64_t j = 0; j < p.S; ++j) std::fill_n(dk + j * dk_row, p.E, T(0));
      for (int64_t j = 0; j < p.S; ++j) std::fill_n(dv + j * dv_row, p.Ev, T(0));
      // d(loss)/d(score ij) = P_ij (dP_ij - delta_i), delta_i = sum_c g_ic out_ic - d(loss)/d(lse_i)
      for (int64_t i = 0; i < p.L && !pairs; ++i) {  // pairs: by lane from the tiles, below
        T d = 0;
        for (int64_t c = 0; c < p.Ev; ++c) d += g[i * g_row + c] * o[i * o_row + c];
        delta[size_t(i)] = glse ? d - glse[i] : d;
      }
      for (int64_t i0 = 0; i0 < p.L; i0 += kQ) {
        const int64_t i1 = std::min(p.L, i0 + kQ), nr = i1 - i0, width = (nr + W - 1) / W * W;
        const int64_t kend = p.causal ? std::min(p.S, i1) : p.S;
        if (pairs) {
          const uint16_t* q16 = static_cast<const uint16_t*>(p.q) + p.q_off[b] + i0 * p.q_row;
          const uint16_t* g16 = static_cast<const uint16_t*>(gr.grad) + gr.grad_rows.off[b] + i0 * gr.grad_rows.row;
          transpose_tile(pairs_at(p.q, p.q_off[b]), p.q_row / 2, p.E / 2, i0, i1, qp.data(), kQ, i0 + width);
          transpose_tile(pairs_at(gr.grad, gr.grad_rows.off[b]), gr.grad_rows.row / 2, p.Ev / 2, i0, i1, gp.data(), kQ, i0 + width);
          amx_bf16::pair_rows(q16, p.q_row, nr, p.E, qq.data(), p.E);
          amx_bf16::pair_rows(g16, gr.grad_rows.row, nr, p.Ev, gq.data(), p.Ev);
          std::fill(dqt.begin(), dqt.end(), 0.0f);
          transpose_tile(pairs_at(gr.out, gr.out_rows.off[b]), gr.out_rows.row / 2, p.Ev / 2, i0, i1, op.data(), kQ, i0 + width);
          if constexpr (std::is_same_v<T, float>) pair_dots(gp.data(), op.data(), p.Ev / 2, width, delta.data() + i0);
          for (int64_t r = 0; r < nr && glse; ++r) delta[size_t(i0 + r)] -= glse[i0 + r];
        } else {
          transpose_tile(q, q_row, p.E, i0, i1, qt.data(), kQ, i0 + width);
          transpose_tile(g, g_row, p.Ev, i0, i1, gt.data(), kQ, i0 + width);
        }
        // padding lanes: lse +inf makes their weights 0
        std::copy(lse + i0, lse + i1, lt.begin());
        std::fill(lt.begin() + nr, lt.end(), std::numeric_limits<T>::infinity());
        std::copy(delta.begin() + i0, delta.begin() + i1, dt.begin());
        std::fill(dt.begin() + nr, dt.end(), T(0));
        for (int64_t j0 = 0; j0 < kend; j0 += kK) {
          const int64_t nk = std::min(kend, j0 + kK) - j0;
          if constexpr (std::is_same_v<T, float>) {
            if (pairs) {
              amx_bf16::tile(nk, width, p.E / 2, pairs_at(p.k, p.k_off[b] + j0 * p.k_row), p.k_row / 2, qp.data(), kQ,
                             st.data(), kQ, false);
              amx_bf16::tile(nk, width, p.Ev / 2, pairs_at(p.v, p.v_off[b] + j0 * p.v_row), p.v_row / 2, gp.data(), kQ,
                             dst.data(), kQ, false);
            }
          }
          if (!pairs) {
            tile_gemm(nk, width, p.E, k + j0 * k_row, k_row, int64_t(1), qt.data(), kQ, st.data(), kQ, false);
            tile_gemm(nk, width, p.Ev, v + j0 * v_row, v_row, int64_t(1), gt.data(), kQ, dst.data(), kQ, false);
          }
          for (int64_t c0 = 0; c0 < width; c0 += W) {
            const Vec<T> rows = lanes + T(i0 + c0), l = load(lt.data() + c0), di = load(dt.data() + c0);
            for (int64_t j = 0; j < nk; ++j) {
              T* sj = st.data() + j * kQ + c0;
              T* dj = dst.data() + j * kQ + c0;
              const Vec<T> pv = softmax_exp<T>(mask_scores<T>(p, b, load(sj) * scale, rows, i0 + c0, i1, j0 + j) - l);  // P
              store(sj, pv);
              store(dj, pv * (load(dj) - di) * scale);  // d(loss)/d(q.k)
            }
          }
          if constexpr (std::is_same_v<T, float>) {
            if (pairs) {
              const int64_t kpairs = amx_pairs((nk + 1) / 2), qpairs = (nr + 1) / 2;
              amx_bf16::pair_rows(dst.data(), kQ, nk, width, sp.data(), kQ);
              zero_pairs(sp.data(), (nk + 1) / 2, kpairs, kQ);
              amx_bf16::tile(p.E, width, kpairs, kt.data() + j0 / 2, kt_ld, sp.data(), kQ, dqt.data(), kQ, true);
              f32_to_bf16(st.data(), reinterpret_cast<uint16_t*>(pq.data()), nk * kQ);
              amx_bf16::tile(nk, p.Ev, qpairs, pq.data(), kQ / 2, gq.data(), p.Ev, dv + j0 * dv_row, dv_row, true);
              f32_to_bf16(dst.data(), reinterpret_cast<uint16_t*>(sq.data()), nk * kQ);
              amx_bf16::tile(nk, p.E, qpairs, sq.data(), kQ / 2, qq.data(), p.E, dk + j0 * dk_row, dk_row, true);
            }
          }
          if (!pairs) {
            tile_gemm(nr, p.E, nk, dst.data(), int64_t(1), kQ, k + j0 * k_row, k_row, dq + i0 * dq_row, dq_row, true);
            tile_gemm(nk, p.Ev, nr, st.data(), kQ, int64_t(1), g + i0 * g_row, g_row, dv + j0 * dv_row, dv_row, true);
            tile_gemm(nk, p.E, nr, dst.data(), kQ, int64_t(1), q + i0 * q_row, q_row, dk + j0 * dk_row, dk_row, true);
          }
        }
        // the tile's dq, summed transposed, into its rows (no other tile writes them)
        if constexpr (std::is_same_v<T, float>) {
          if (pairs)
            transpose_plane(reinterpret_cast<const uint32_t*>(dqt.data()), kQ, reinterpret_cast<uint32_t*>(dq + i0 * dq_row),
                            dq_row, nr, p.E);
        }
      }
      if constexpr (std::is_same_v<T, float>) {
        if (bf16) {
          auto narrow = [&](const T* src, void* base, const AttentionRows& rows, int64_t n, int64_t w) {
            for (int64_t i = 0; i < n; ++i) narrow_rows(src + i * w, base, rows.off[b] + i * rows.row, w);
          };
          narrow(dq, gr.dq, gr.dq_rows, p.L, p.E);
          narrow(dk, gr.dk, gr.dk_rows, p.S, p.E);
          narrow(dv, gr.dv, gr.dv_rows, p.S, p.Ev);
        }
      }
    }
    if (pairs) amx_bf16::release();
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
