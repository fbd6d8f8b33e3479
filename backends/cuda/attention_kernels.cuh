// flash_attention's CUDA kernels (backends/cuda/attention.cpp renders them after the prelude, per dtype and row
// width, as extern "C" wrappers). Plain CUDA C++ over a few intrinsics, so tests/test_cuda_attention_emulated.cpp
// also compiles it for the CPU with a warp emulated by threads: the kernels' arithmetic is checked without a GPU.
// AttnParams is attention.cpp's struct, field for field (offsets and strides in elements).
#ifndef KILN_UNROLL
#define KILN_UNROLL _Pragma("unroll")  // the emulated build defines it empty
#endif
#define KILN_ATT_NB 8  // attention.cpp's kBatchDims
struct AttnParams {
  const char *q, *k, *v, *mask;
  const char *grad, *out_in, *lse_in, *grad_lse;
  char *out, *lse, *dq, *dk, *dv, *delta;
  long long rows, L, S, E, Ev;
  long long q_row, k_row, v_row, m_row, m_col;
  long long bsize[KILN_ATT_NB], qb[KILN_ATT_NB], kb[KILN_ATT_NB], vb[KILN_ATT_NB], mb[KILN_ATT_NB];
  int nb, mask_kind, causal, pad;
  double scale;
};

// The warp's sum, lane 0's bits handed to every lane, so the lanes take the same branches and maxima.
template <class A>
__device__ __forceinline__ A kiln_att_sum(A x) {
KILN_UNROLL
  for (int s = 16; s > 0; s >>= 1) x += __shfl_xor_sync(0xffffffffu, x, s);
  return __shfl_sync(0xffffffffu, x, 0);
}

// Element offsets of batch index b into q, k, v and the mask.
__device__ __forceinline__ void kiln_att_offsets(const AttnParams& p, long long b, long long* o) {
  o[0] = o[1] = o[2] = o[3] = 0;
  for (int d = p.nb - 1; d >= 0; --d) {
    const long long s = p.bsize[d], id = b % s;
    b /= s;
    o[0] += id * p.qb[d];
    o[1] += id * p.kb[d];
    o[2] += id * p.vb[d];
    o[3] += id * p.mb[d];
  }
}

// Query row i's score against key j, scaled and masked (-inf where a bool mask says no): one row is in the
// lanes' registers, the other read from memory.
template <class T, class A, int KD>
__device__ __forceinline__ A kiln_att_score(const AttnParams& p, const A* reg, const T* row, long long moff,
                                            long long i, long long j) {
  const int lane = threadIdx.x & 31;
  A s = A(0);
KILN_UNROLL
  for (int t = 0; t < KD; ++t) {
    const long long c = lane + 32 * t;
    if (c < p.E) s += reg[t] * A(row[c]);
  }
  s = kiln_att_sum(s) * A(p.scale);
  if (p.mask_kind == 1) {
    if (!*((const bool*)p.mask + moff + i * p.m_row + j * p.m_col)) s = klowest<A>();
  } else if (p.mask_kind == 2) {
    s += ((const A*)p.mask)[moff + i * p.m_row + j * p.m_col];
  }
  return s;
}

// The warp's row of `per_batch` rows a batch index (false past the launch's rows: the whole warp returns, as a
// row is the warp's), its batch index and place, and the batch index's offsets into q, k, v and the mask.
__device__ __forceinline__ bool kiln_att_row(const AttnParams& p, long long per_batch, long long& row, long long& b,
                                             long long& at, long long* off) {
  row = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  if (row >= p.rows) return false;
  b = row / per_batch;
  at = row - b * per_batch;
  kiln_att_offsets(p, b, off);
  return true;
}

// One warp per query row: the online softmax over the keys it sees, then out = acc / sum, lse = max + log sum.
template <class T, class A, int KD>
__device__ void kiln_att_fwd(const AttnParams& p) {
  long long row, b, i, off[4];
  if (!kiln_att_row(p, p.L, row, b, i, off)) return;
  const int lane = threadIdx.x & 31;
  const T* q = (const T*)p.q + off[0] + i * p.q_row;
  A qr[KD], acc[KD];
KILN_UNROLL
  for (int t = 0; t < KD; ++t) {
    const long long c = lane + 32 * t;
    qr[t] = c < p.E ? A(q[c]) : A(0);
    acc[t] = A(0);
  }
  A m = klowest<A>(), l = A(0);
  const long long keys = p.causal && i + 1 < p.S ? i + 1 : p.S;
  for (long long j = 0; j < keys; ++j) {
    const A s = kiln_att_score<T, A, KD>(p, qr, (const T*)p.k + off[1] + j * p.k_row, off[3], i, j);
    if (s == klowest<A>()) continue;  // a masked key adds nothing
    const A mn = s > m ? s : m, alpha = exp(m - mn), e = exp(s - mn);
    l = l * alpha + e;
    const T* vj = (const T*)p.v + off[2] + j * p.v_row;
KILN_UNROLL
    for (int t = 0; t < KD; ++t) {
      const long long c = lane + 32 * t;
      if (c < p.Ev) acc[t] = acc[t] * alpha + e * A(vj[c]);
    }
    m = mn;
  }
  // a row that attends nowhere divides 0 by 0: NaN, as the softmax of all -inf; no keys at all: zeros
  T* out = (T*)p.out + row * p.Ev;
KILN_UNROLL
  for (int t = 0; t < KD; ++t) {
    const long long c = lane + 32 * t;
    if (c < p.Ev) out[c] = T(p.S == 0 ? A(0) : acc[t] / l);
  }
  if (lane == 0) ((A*)p.lse)[row] = m + log(l);
}

// One warp per query row: delta = grad . out - grad_lse (kept for the key rows' kernel), then
// dq = sum_j P_ij (grad . v_j - delta) scale k_j, P recomputed from the forward's lse.
template <class T, class A, int KD>
__device__ void kiln_att_bwd_q(const AttnParams& p) {
  long long row, b, i, off[4];
  if (!kiln_att_row(p, p.L, row, b, i, off)) return;
  const int lane = threadIdx.x & 31;
  const T* q = (const T*)p.q + off[0] + i * p.q_row;
  const T* g = (const T*)p.grad + row * p.Ev;
  const T* o = (const T*)p.out_in + row * p.Ev;
  A qr[KD], gr[KD], dq[KD], d = A(0);
KILN_UNROLL
  for (int t = 0; t < KD; ++t) {
    const long long c = lane + 32 * t;
    qr[t] = c < p.E ? A(q[c]) : A(0);
    gr[t] = c < p.Ev ? A(g[c]) : A(0);
    if (c < p.Ev) d += gr[t] * A(o[c]);
    dq[t] = A(0);
  }
  d = kiln_att_sum(d);
  if (p.grad_lse) d -= ((const A*)p.grad_lse)[row];
  if (lane == 0) ((A*)p.delta)[row] = d;
  const A l = ((const A*)p.lse_in)[row], scale = A(p.scale);
  const long long keys = p.causal && i + 1 < p.S ? i + 1 : p.S;
  for (long long j = 0; j < keys; ++j) {
    const T* kj = (const T*)p.k + off[1] + j * p.k_row;
    const T* vj = (const T*)p.v + off[2] + j * p.v_row;
    const A s = kiln_att_score<T, A, KD>(p, qr, kj, off[3], i, j);
    A dp = A(0);
KILN_UNROLL
    for (int t = 0; t < KD; ++t) {
      const long long c = lane + 32 * t;
      if (c < p.Ev) dp += gr[t] * A(vj[c]);
    }
    dp = kiln_att_sum(dp);
    const A pr = exp(s - l), ds = pr * (dp - d) * scale;
KILN_UNROLL
    for (int t = 0; t < KD; ++t) {
      const long long c = lane + 32 * t;
      if (c < p.E) dq[t] += ds * A(kj[c]);
    }
  }
  T* out = (T*)p.dq + row * p.E;
KILN_UNROLL
  for (int t = 0; t < KD; ++t) {
    const long long c = lane + 32 * t;
    if (c < p.E) out[c] = T(dq[t]);
  }
}

// One warp per key row (after the query rows' kernel wrote delta): dv = sum_i P_ij grad_i,
// dk = sum_i P_ij (grad_i . v_j - delta_i) scale q_i, over the query rows that see key j.
template <class T, class A, int KD>
__device__ void kiln_att_bwd_kv(const AttnParams& p) {
  long long row, b, j, off[4];
  if (!kiln_att_row(p, p.S, row, b, j, off)) return;
  const int lane = threadIdx.x & 31;
  const T* k = (const T*)p.k + off[1] + j * p.k_row;
  const T* v = (const T*)p.v + off[2] + j * p.v_row;
  A kr[KD], vr[KD], dk[KD], dv[KD];
KILN_UNROLL
  for (int t = 0; t < KD; ++t) {
    const long long c = lane + 32 * t;
    kr[t] = c < p.E ? A(k[c]) : A(0);
    vr[t] = c < p.Ev ? A(v[c]) : A(0);
    dk[t] = dv[t] = A(0);
  }
  const A scale = A(p.scale);
  for (long long i = p.causal ? j : 0; i < p.L; ++i) {
    const T* qi = (const T*)p.q + off[0] + i * p.q_row;
    const long long r = b * p.L + i;
    const T* gi = (const T*)p.grad + r * p.Ev;
    const A pr = exp(kiln_att_score<T, A, KD>(p, kr, qi, off[3], i, j) - ((const A*)p.lse_in)[r]);
    A dp = A(0);
KILN_UNROLL
    for (int t = 0; t < KD; ++t) {
      const long long c = lane + 32 * t;
      if (c < p.Ev) {
        const A gc = A(gi[c]);
        dv[t] += pr * gc;
        dp += gc * vr[t];
      }
    }
    dp = kiln_att_sum(dp);
    const A ds = pr * (dp - ((const A*)p.delta)[r]) * scale;
KILN_UNROLL
    for (int t = 0; t < KD; ++t) {
      const long long c = lane + 32 * t;
      if (c < p.E) dk[t] += ds * A(qi[c]);
    }
  }
  T* odk = (T*)p.dk + row * p.E;
  T* odv = (T*)p.dv + row * p.Ev;
KILN_UNROLL
  for (int t = 0; t < KD; ++t) {
    const long long c = lane + 32 * t;
    if (c < p.E) odk[c] = T(dk[t]);
    if (c < p.Ev) odv[c] = T(dv[t]);
  }
}
