// Reduction kernels: sum, prod, amax and amin over any set of dims, argmax and argmin over one dim (or
// the flattened tensor), for any strides. A reduction is planned once: the input's dims split into kept
// and reduced groups, each ordered by stride and coalesced. It then runs in one of two layouts:
//   rows:    the reduced dims are innermost in memory; each output folds contiguous (or strided) rows;
//   columns: a kept dim is innermost; a block of outputs accumulates whole input rows at a time.
// Both inner loops run on vectors. Large reductions run on OpenMP threads, over independent outputs when
// there are enough, else by splitting the reduction and merging partials in a fixed order (results depend
// on the thread count, never on scheduling).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "eager/cpu/copy.h"
#include "eager/cpu/strided_loop.h"
#include "eager/cpu/views.h"
#include "eager/kernels.h"

#include "eager/cpu/reduce_dims.h"

namespace kiln::cpu {

// ---- dims, shapes and errors ----

std::vector<bool> reduce_mask(std::string_view op, const Tensor& x, const Shape& dims) {
  const int64_t nd = x.dim();
  std::vector<bool> mask(size_t(std::max<int64_t>(nd, 1)), dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(op, d, nd);
    if (mask[size_t(w)]) fail("{}: dim {} appears multiple times in the list of dims {}", op, w, shape_str(dims));
    mask[size_t(w)] = true;
  }
  return mask;
}

Shape reduced_shape(const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  Shape s;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!mask[size_t(d)]) s.push_back(x.sizes()[size_t(d)]);
    else if (keepdim) s.push_back(1);
  }
  return s;
}

void require_nonempty(std::string_view op, const Tensor& x, const std::vector<bool>& mask) {
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[size_t(d)] && x.sizes()[size_t(d)] == 0)
      fail("{}: cannot reduce over a zero-size dimension: dim {} of input shape {}", op, d, shape_str(x.sizes()));
}

namespace {

// Contiguous rows fold into kUnroll independent native vectors (16 bytes: SSE2, the baseline this file
// is built for), written with GCC vector types because the auto-vectoriser leaves the NaN-aware selects
// of max/min/argmax scalar.
constexpr int kVecBytes = 16;
constexpr int kUnroll = 4;
// Vector rounds between flushes into the accumulator: a float32 lane holds at most kFlushRounds * kUnroll
// values before it is widened, which keeps a float32 sum's error near float64's whatever its length.
constexpr int64_t kFlushRounds = 64;
// Outputs accumulated together in the columns layout.
constexpr int64_t kBlockCols = 1024;

template <class T, int N>
struct VecOf {
  using type [[gnu::vector_size(N * sizeof(T))]] = T;
};
template <class T, int N>
using VecN = typename VecOf<T, N>::type;

// {start, start + 1, ...}: built whole, as element stores to a vector trip -Wmaybe-uninitialized.
template <class V, class E, int... Is>
V iota_vec(std::integer_sequence<int, Is...>, E start) {
  return V{E(start + Is)...};
}

template <class V>
V load(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool is_half(DType t) { return t == DType::BFloat16 || t == DType::Float16; }

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// ---- the plan ----

// A group of dims, innermost first, with element strides into the input and the output.
struct DimGroup {
  int n = 0;
  int64_t size[kMaxDims] = {};
  int64_t in[kMaxDims] = {};
  int64_t out[kMaxDims] = {};
  int64_t count() const {
    int64_t c = 1;
    for (int k = 0; k < n; ++k) c *= size[k];
    return c;
  }
  void push(int64_t s, int64_t i, int64_t o) {
    size[n] = s;
    in[n] = i;
    out[n] = o;
    ++n;
  }
};

// Memory order with broadcast (stride 0) dims outermost: they re-read the same data, so they belong
// in the outer loops.
int64_t stride_key(int64_t s) { return s == 0 ? std::numeric_limits<int64_t>::max() : (s < 0 ? -s : s); }

DimGroup order_and_coalesce(DimGroup g) {
  int idx[kMaxDims];
  for (int k = 0; k < g.n; ++k) idx[k] = k;
  std::stable_sort(idx, idx + g.n, [&](int a, int b) { return stride_key(g.in[a]) < stride_key(g.in[b]); });
  DimGroup r;
  for (int j = 0; j < g.n; ++j) {
    int k = idx[j];
    if (r.n > 0) {
      int m = r.n - 1;
      if (g.in[k] == r.in[m] * r.size[m] && g.out[k] == r.out[m] * r.size[m]) {
        r.size[m] *= g.size[k];
        continue;
      }
    }
    r.push(g.size[k], g.in[k], g.out[k]);
  }
  if (r.n == 0) r.push(1, 0, 0);  // no dims: one step, so loops need no special case
  return r;
}

struct Plan {
  DimGroup kept, red;
  bool columns = false;
  int64_t nout = 1, nred = 1;
};

// `mask` marks the reduced dims of x; the output is contiguous in x's dim order (reduced dims dropped
// or kept as 1, which is the same memory layout).
Plan make_plan(const Tensor& x, const std::vector<bool>& mask) {
  Plan P;
  const int64_t nd = x.dim();
  if (nd > kMaxDims) fail("reduce: rank {} exceeds the {} dims kiln's kernels support", nd, kMaxDims);
  Shape kshape = x.sizes();
  for (int64_t d = 0; d < nd; ++d)
    if (mask[size_t(d)]) kshape[size_t(d)] = 1;
  Shape ostr = contiguous_strides(kshape);
  DimGroup kept, red;
  for (int64_t d = nd - 1; d >= 0; --d) {
    int64_t s = x.sizes()[size_t(d)];
    if (s == 1) continue;
    if (mask[size_t(d)]) red.push(s, x.strides()[size_t(d)], 0);
    else kept.push(s, x.strides()[size_t(d)], ostr[size_t(d)]);
  }
  P.kept = order_and_coalesce(kept);
  P.red = order_and_coalesce(red);
  P.nout = P.kept.count();
  P.nred = P.red.count();
  P.columns = kept.n > 0 && stride_key(P.kept.in[0]) < stride_key(P.red.in[0]);
  return P;
}

// Walks a flat index over a dim group, keeping the input and output offsets.
struct Walker {
  const DimGroup& g;
  int64_t idx[kMaxDims] = {};
  int64_t in = 0, out = 0;
  Walker(const DimGroup& group, int64_t start) : g(group) {
    for (int k = 0; k < g.n; ++k) {
      idx[k] = start % g.size[k];
      start /= g.size[k];
      in += idx[k] * g.in[k];
      out += idx[k] * g.out[k];
    }
  }
  void next() {
    for (int k = 0; k < g.n; ++k) {
      in += g.in[k];
      out += g.out[k];
      if (++idx[k] < g.size[k]) return;
      idx[k] = 0;
      in -= g.size[k] * g.in[k];
      out -= g.size[k] * g.out[k];
    }
  }
};

// ---- the folds ----
// A fold Op gives: In, Acc, Out; identity(); row(acc, p, n, stride, r0) folding n elements whose flat
// reduction indices start at r0; cols(acc, p, n, stride, r) folding p[j*stride] into acc[j];
// merge(earlier, later); finish(acc).

// Each fold has a scalar apply and a vector vapply<Element> over GCC vectors.
struct Add {
  template <class T> static T identity() { return T(0); }
  template <class T> static T apply(T a, T b) { return a + b; }
  template <class E, class V> static V vapply(V a, V b) { return a + b; }
};
struct Mul {
  template <class T> static T identity() { return T(1); }
  template <class T> static T apply(T a, T b) { return a * b; }
  template <class E, class V> static V vapply(V a, V b) { return a * b; }
};
// NaN wins: once the running value is NaN no comparison replaces it. Bitwise | rather than || keeps the
// select branch-free, which is what lets the compiler vectorise it.
struct Max {
  template <class T> static T identity() {
    if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  template <class T> static T apply(T m, T x) { return ((x > m) | is_nan(x)) ? x : m; }
  template <class E, class V> static V vapply(V m, V x) {
    if constexpr (std::is_floating_point_v<E>) return ((x > m) | (x != x)) ? x : m;
    else return x > m ? x : m;
  }
};
struct Min {
  template <class T> static T identity() {
    if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
  }
  template <class T> static T apply(T m, T x) { return ((x < m) | is_nan(x)) ? x : m; }
  template <class E, class V> static V vapply(V m, V x) {
    if constexpr (std::is_floating_point_v<E>) return ((x < m) | (x != x)) ? x : m;
    else return x < m ? x : m;
  }
};

// An associative fold; contiguous rows go through vectors of partial results of type LaneT.
template <class InT, class AccT, class OutT, class LaneT, class F>
struct Fold {
  using In = InT;
  using Acc = AccT;
  using Out = OutT;
  static constexpr bool kMergeIsStep = true;
  static Acc identity() { return F::template identity<Acc>(); }
  static Acc merge(Acc a, Acc b) { return F::apply(a, b); }
  static Out finish(Acc a) { return Out(a); }
  static Acc row(Acc acc, const In* __restrict p, int64_t n, int64_t s, int64_t) {
    int64_t i = 0;
    if constexpr (!std::is_same_v<LaneT, bool>) {  // no bool vectors: bool max/min stay scalar
      constexpr int N = kVecBytes / int(sizeof(LaneT));
      constexpr int64_t step = N * kUnroll;
      using LV = VecN<LaneT, N>;
      using Raw = VecN<std::conditional_t<std::is_same_v<In, bool>, uint8_t, In>, N>;
      if (s == 1) {
        while (n - i >= step) {
          LV lane[kUnroll];
          for (auto& l : lane) l = LV{} + F::template identity<LaneT>();
          int64_t end = i + std::min<int64_t>((n - i) / step, kFlushRounds) * step;
          for (; i < end; i += step)
            for (int u = 0; u < kUnroll; ++u) {
              Raw raw = load<Raw>(p + i + u * N);
              LV x;
              if constexpr (std::is_same_v<Raw, LV>) x = raw;
              else x = __builtin_convertvector(raw, LV);
              lane[u] = F::template vapply<LaneT>(lane[u], x);
            }
          for (int u = 1; u < kUnroll; ++u) lane[0] = F::template vapply<LaneT>(lane[0], lane[u]);
          for (int k = 0; k < N; ++k) acc = F::apply(acc, Acc(lane[0][k]));
        }
      }
    }
    for (; i < n; ++i) acc = F::apply(acc, Acc(p[i * s]));
    return acc;
  }
  static void cols(Acc* __restrict acc, const In* __restrict p, int64_t n, int64_t s, int64_t) {
    if (s == 1) {
      for (int64_t j = 0; j < n; ++j) acc[j] = F::apply(acc[j], Acc(p[j]));
    } else {
      for (int64_t j = 0; j < n; ++j) acc[j] = F::apply(acc[j], Acc(p[j * s]));
    }
  }
};

// argmax / argmin: the first index of the extreme value, NaN counting as the extreme.
template <class T, bool IsMax>
struct ArgFold {
  static constexpr bool kMergeIsStep = false;
  using In = T;
  struct Acc {
    T v;
    int64_t i;  // -1: nothing seen yet
  };
  using Out = int64_t;
  static bool better(T x, T best) {
    if constexpr (IsMax) return (x > best) | (is_nan(x) & !is_nan(best));
    else return (x < best) | (is_nan(x) & !is_nan(best));
  }
  static Acc identity() { return {T{}, -1}; }
  // Order-free: ties (and NaN against NaN) go to the smaller index.
  static Acc merge(Acc a, Acc b) {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    if (better(b.v, a.v)) return b;
    if (better(a.v, b.v)) return a;
    return a.i <= b.i ? a : b;
  }
  static Out finish(Acc a) { return a.i; }
  static Acc row(Acc acc, const T* __restrict p, int64_t n, int64_t s, int64_t r0) {
    int64_t i = 0;
    if constexpr (!std::is_same_v<T, bool>) {
      // Each lane scans its own residue class in order and only moves on a strict improvement, so it
      // holds the first index of its best; merge settles ties across lanes by index. Lane indices are
      // integers as wide as T (so masks and indices share a vector shape), relative to a block short
      // enough for int32.
      constexpr int N = kVecBytes / int(sizeof(T));
      constexpr int64_t step = N * kUnroll;
      constexpr int64_t kMaxBlock = int64_t(1) << 30;
      using I = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;
      using V = VecN<T, N>;
      using VI = VecN<I, N>;
      if (s == 1) {
        while (n - i >= 2 * step) {
          const int64_t len = std::min(n - i, kMaxBlock) / step * step;
          const T* q = p + i;
          V lv[kUnroll];
          VI li[kUnroll], cur[kUnroll];
          for (int u = 0; u < kUnroll; ++u) {
            lv[u] = load<V>(q + u * N);
            li[u] = iota_vec<VI, I>(std::make_integer_sequence<int, N>{}, I(u * N));
            cur[u] = li[u];
          }
          for (int64_t b = step; b < len; b += step)
            for (int u = 0; u < kUnroll; ++u) {
              cur[u] += I(step);
              V x = load<V>(q + b + u * N);
              VI m;
              if constexpr (IsMax) m = (x > lv[u]) | ((x != x) & (lv[u] == lv[u]));
              else m = (x < lv[u]) | ((x != x) & (lv[u] == lv[u]));
              lv[u] = m ? x : lv[u];
              li[u] = m ? cur[u] : li[u];
            }
          for (int u = 0; u < kUnroll; ++u)
            for (int k = 0; k < N; ++k) acc = merge(acc, Acc{lv[u][k], r0 + i + int64_t(li[u][k])});
          i += len;
        }
      }
    }
    for (; i < n; ++i) {
      T x = p[i * s];
      if (acc.i < 0 || better(x, acc.v)) acc = Acc{x, r0 + i};
    }
    return acc;
  }
  static void cols(Acc* __restrict acc, const T* __restrict p, int64_t n, int64_t s, int64_t r) {
    for (int64_t j = 0; j < n; ++j) {
      T x = p[j * s];
      if (acc[j].i < 0 || better(x, acc[j].v)) acc[j] = Acc{x, r};
    }
  }
};

// ---- the driver ----

int parallel_chunks(int64_t work, int64_t units) {
#ifdef _OPENMP
  int threads = omp_get_max_threads();
  if (threads <= 1 || work < 2 * kParallelGrain || omp_in_parallel()) return 1;
  return int(std::max<int64_t>(1, std::min<int64_t>({int64_t(threads), work / kParallelGrain, units})));
#else
  (void)work;
  (void)units;
  return 1;
#endif
}

// Folds the flat reduction indices [b, e) starting from base.
template <class Op>
typename Op::Acc fold_range(const DimGroup& red, const typename Op::In* base, int64_t b, int64_t e) {
  typename Op::Acc acc = Op::identity();
  if (b >= e) return acc;
  int64_t idx[kMaxDims];
  int64_t off = 0, rem = b;
  for (int k = 0; k < red.n; ++k) {
    idx[k] = rem % red.size[k];
    rem /= red.size[k];
    off += idx[k] * red.in[k];
  }
  const int64_t n0 = red.size[0], s0 = red.in[0];
  for (int64_t pos = b; pos < e;) {
    int64_t n = std::min(n0 - idx[0], e - pos);
    acc = Op::row(acc, base + off, n, s0, pos);
    pos += n;
    idx[0] += n;
    off += n * s0;
    if (idx[0] < n0) break;  // only when pos reached e mid-row
    idx[0] = 0;
    off -= n0 * s0;
    for (int k = 1; k < red.n; ++k) {
      off += red.in[k];
      if (++idx[k] < red.size[k]) break;
      idx[k] = 0;
      off -= red.size[k] * red.in[k];
    }
  }
  return acc;
}

// [N, C, S] reduced over N and S with C kept and S short (a batch norm's statistics and gradients over
// [N, C, H, W] late in a CNN: H*W of 16, 4 or 1): row by row that is N*C folds of S elements each,
// all overhead. Instead the [C, S] blocks are summed over N as columns (contiguous, vectorised), then
// each run of S is merged into its output. For folds whose merge is their step (sum, prod, max, min).
template <class Op>
bool run_short_rows(const Plan& P, const typename Op::In* x, typename Op::Out* out) {
  using Acc = typename Op::Acc;
  if (P.red.n != 2 || P.kept.n != 1 || P.red.in[0] != 1 || P.red.size[0] >= 32) return false;
  const int64_t S = P.red.size[0], C = P.kept.size[0], N = P.red.size[1];
  if (P.kept.in[0] != S || P.red.in[1] != C * S || C * S > (int64_t(1) << 16)) return false;
  int chunks = parallel_chunks(P.nout * P.nred, C);
#pragma omp parallel for num_threads(chunks) schedule(static) if (chunks > 1)
  for (int t = 0; t < chunks; ++t) {
    const int64_t c0 = C * t / chunks, c1 = C * (t + 1) / chunks, w = (c1 - c0) * S;
    std::unique_ptr<Acc[]> acc(new Acc[size_t(std::max<int64_t>(w, 1))]);
    for (int64_t j = 0; j < w; ++j) acc[size_t(j)] = Op::identity();
    for (int64_t n = 0; n < N; ++n) Op::cols(acc.get(), x + n * C * S + c0 * S, w, 1, n * S);
    for (int64_t c = c0; c < c1; ++c) {
      Acc a = acc[size_t((c - c0) * S)];
      for (int64_t k = 1; k < S; ++k) a = Op::merge(a, acc[size_t((c - c0) * S + k)]);
      out[c * P.kept.out[0]] = Op::finish(a);
    }
  }
  return true;
}

template <class Op>
void run_rows(const Plan& P, const typename Op::In* x, typename Op::Out* out) {
  using Acc = typename Op::Acc;
  const int64_t nout = P.nout, nred = P.nred;
  // One reduced dim (the common case) is a single row per output: skip fold_range's index bookkeeping,
  // which dominates short rows.
  auto fold_all = [&](const typename Op::In* base) {
    if (P.red.n == 1) return Op::row(Op::identity(), base, nred, P.red.in[0], 0);
    return fold_range<Op>(P.red, base, 0, nred);
  };
  int chunks = parallel_chunks(nout * nred, std::max<int64_t>(nout, nred / kParallelGrain));
  if (chunks > 1 && nout >= chunks) {
#pragma omp parallel for num_threads(chunks) schedule(static)
    for (int c = 0; c < chunks; ++c) {
      int64_t ob = nout * c / chunks, oe = nout * (c + 1) / chunks;
      Walker w(P.kept, ob);
      for (int64_t o = ob; o < oe; ++o, w.next()) out[w.out] = Op::finish(fold_all(x + w.in));
    }
    return;
  }
  Walker w(P.kept, 0);
  for (int64_t o = 0; o < nout; ++o, w.next()) {
    const typename Op::In* base = x + w.in;
    if (chunks > 1) {
      std::unique_ptr<Acc[]> part(new Acc[size_t(chunks)]);
#pragma omp parallel for num_threads(chunks) schedule(static)
      for (int c = 0; c < chunks; ++c)
        part[size_t(c)] = fold_range<Op>(P.red, base, nred * c / chunks, nred * (c + 1) / chunks);
      Acc acc = part[0];
      for (int c = 1; c < chunks; ++c) acc = Op::merge(acc, part[size_t(c)]);
      out[w.out] = Op::finish(acc);
    } else {
      out[w.out] = Op::finish(fold_all(base));
    }
  }
}

template <class Op>
void run_columns(const Plan& P, const typename Op::In* x, typename Op::Out* out) {
  using Acc = typename Op::Acc;
  const int64_t ncol = P.kept.size[0], kin = P.kept.in[0], kout = P.kept.out[0];
  DimGroup outer;
  for (int k = 1; k < P.kept.n; ++k) outer.push(P.kept.size[k], P.kept.in[k], P.kept.out[k]);
  if (outer.n == 0) outer.push(1, 0, 0);
  const int64_t nblocks = (ncol + kBlockCols - 1) / kBlockCols;
  const int64_t items = outer.count() * nblocks;
  const int64_t nred = P.nred;

  struct Item {
    const typename Op::In* base;
    int64_t out_off, j0, nb;
  };
  auto item_at = [&](int64_t it) {
    int64_t blk = it % nblocks;
    Walker w(outer, it / nblocks);
    int64_t j0 = blk * kBlockCols;
    return Item{x + w.in + j0 * kin, w.out + j0 * kout, j0, std::min(kBlockCols, ncol - j0)};
  };
  auto accumulate = [&](const Item& item, Acc* acc, int64_t rb, int64_t re) {
    for (int64_t j = 0; j < item.nb; ++j) acc[j] = Op::identity();
    if (P.red.n == 1) {
      for (int64_t pos = rb; pos < re; ++pos) Op::cols(acc, item.base + pos * P.red.in[0], item.nb, kin, pos);
      return;
    }
    Walker r(P.red, rb);
    for (int64_t pos = rb; pos < re; ++pos, r.next()) Op::cols(acc, item.base + r.in, item.nb, kin, pos);
  };
  auto store = [&](const Item& item, const Acc* acc) {
    for (int64_t j = 0; j < item.nb; ++j) out[item.out_off + j * kout] = Op::finish(acc[j]);
  };

  int chunks = parallel_chunks(P.nout * nred, std::max<int64_t>(items, nred / 64));
  if (chunks > 1 && items >= chunks) {
#pragma omp parallel for num_threads(chunks) schedule(static)
    for (int c = 0; c < chunks; ++c) {
      // not std::vector: Acc may be bool, and vector<bool> has no data()
      std::unique_ptr<Acc[]> acc(new Acc[size_t(std::min(kBlockCols, ncol))]);
      for (int64_t it = items * c / chunks; it < items * (c + 1) / chunks; ++it) {
        Item item = item_at(it);
        accumulate(item, acc.get(), 0, nred);
        store(item, acc.get());
      }
    }
    return;
  }
  const int64_t width = std::min(kBlockCols, ncol);
  std::unique_ptr<Acc[]> acc(new Acc[size_t(width) * size_t(chunks)]);
  for (int64_t it = 0; it < items; ++it) {
    Item item = item_at(it);
    if (chunks > 1) {
#pragma omp parallel for num_threads(chunks) schedule(static)
      for (int c = 0; c < chunks; ++c)
        accumulate(item, acc.get() + c * width, nred * c / chunks, nred * (c + 1) / chunks);
      for (int c = 1; c < chunks; ++c)
        for (int64_t j = 0; j < item.nb; ++j) acc[size_t(j)] = Op::merge(acc[size_t(j)], acc[size_t(c * width + j)]);
    } else {
      accumulate(item, acc.get(), 0, nred);
    }
    store(item, acc.get());
  }
}

template <class Op>
void run(const Plan& P, const Tensor& x, const Tensor& out) {
  const auto* xp = static_cast<const typename Op::In*>(x.raw_data());
  auto* op = static_cast<typename Op::Out*>(out.raw_data());
  if (P.nout == 0) return;
  if (P.nred == 0) {
    for (int64_t o = 0; o < P.nout; ++o) op[o] = Op::finish(Op::identity());
    return;
  }
  if (P.columns) run_columns<Op>(P, xp, op);
  else if (!(Op::kMergeIsStep && run_short_rows<Op>(P, xp, op))) run_rows<Op>(P, xp, op);
}


// Half types are widened once up front: the folds then only see float32.
Tensor widened(const Tensor& x) { return is_half(x.dtype()) ? cast_to(x, DType::Float32) : x; }

Tensor narrowed(const Tensor& out, DType dtype) { return out.dtype() == dtype ? out : cast_to(out, dtype); }

// sum and prod: bool and ints accumulate in int64 and return int64 (torch), floats keep their dtype.
template <class F, bool FloatLanesForSum>
Tensor sum_like(OpId op, const Tensors& in, const Attrs& attrs) {
  std::string_view name = op_name(op);
  const Tensor& x0 = in.at(0);
  auto mask = reduce_mask(name, x0, attrs.has("dims") ? attrs.ints("dims") : Shape{});
  Tensor x = widened(x0);
  DType out_t = is_floating(x0.dtype()) ? x0.dtype() : DType::Int64;
  Tensor out = Tensor::empty(reduced_shape(x0, mask, attrs.b_or("keepdim", false)), is_floating(x.dtype()) ? x.dtype() : DType::Int64);
  Plan P = make_plan(x, mask);
  visit_dtype(x.dtype(), [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, float>) {
      // float32 sums accumulate in float64 behind short float32 lane runs; products stay float32 (torch)
      if constexpr (FloatLanesForSum) run<Fold<float, double, float, float, F>>(P, x, out);
      else run<Fold<float, float, float, float, F>>(P, x, out);
    } else if constexpr (std::is_same_v<T, double>) {
      run<Fold<double, double, double, double, F>>(P, x, out);
    } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      run<Fold<T, int64_t, int64_t, int64_t, F>>(P, x, out);
    } else {
      fail("{}: unexpected dtype {}", name, dtype_name(x.dtype()));
    }
  });
  return narrowed(out, out_t);
}

template <class F>
Tensor extreme(OpId op, const Tensors& in, const Attrs& attrs) {
  std::string_view name = op_name(op);
  const Tensor& x0 = in.at(0);
  auto mask = reduce_mask(name, x0, attrs.has("dims") ? attrs.ints("dims") : Shape{});
  require_nonempty(name, x0, mask);
  Tensor x = widened(x0);
  Tensor out = Tensor::empty(reduced_shape(x0, mask, attrs.b_or("keepdim", false)), x.dtype());
  Plan P = make_plan(x, mask);
  visit_dtype(x.dtype(), [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>) fail("{}: unexpected half input", name);
    else run<Fold<T, T, T, T, F>>(P, x, out);
  });
  return narrowed(out, x0.dtype());
}

template <bool IsMax>
Tensor arg_extreme(OpId op, const Tensors& in, const Attrs& attrs) {
  std::string_view name = op_name(op);
  const Tensor& x0 = in.at(0);
  const bool keepdim = attrs.b_or("keepdim", false);
  Tensor x = widened(x0);
  std::vector<bool> mask;
  if (attrs.has("dim")) {
    int64_t d = wrap_dim(name, attrs.i("dim"), x0.dim());
    mask.assign(size_t(std::max<int64_t>(x0.dim(), 1)), false);
    mask[size_t(d)] = true;
    require_nonempty(name, x0, mask);
  } else {
    if (x0.numel() == 0)
      fail("{}: expected reduction dim to be specified for an input with no elements, got shape {}", name,
           shape_str(x0.sizes()));
    // The flattened index is the row-major one, so a layout that cannot be viewed flat is copied first.
    Shape flat{x.numel()};
    if (auto st = view_strides(x, flat)) {
      x = make_view(x, flat, *st, x.storage_offset());
    } else {
      Tensor c = cast_to(x, x.dtype());
      x = make_view(c, flat, {1}, c.storage_offset());
    }
    mask.assign(1, true);
  }
  // The output holds one value per kept element in order, whatever shape it is given.
  Shape out_shape = attrs.has("dim") ? reduced_shape(x0, mask, keepdim) : keepdim ? Shape(size_t(x0.dim()), 1) : Shape{};
  Tensor out = Tensor::empty(out_shape, DType::Int64);
  Plan P = make_plan(x, mask);
  visit_dtype(x.dtype(), [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>) fail("{}: unexpected half input", name);
    else run<ArgFold<T, IsMax>>(P, x, out);
  });
  return out;
}

}  // namespace

Tensors kernel_sum(OpId op, const Tensors& in, const Attrs& attrs) { return {sum_like<Add, true>(op, in, attrs)}; }
Tensors kernel_prod(OpId op, const Tensors& in, const Attrs& attrs) { return {sum_like<Mul, false>(op, in, attrs)}; }
Tensors kernel_amax(OpId op, const Tensors& in, const Attrs& attrs) { return {extreme<Max>(op, in, attrs)}; }
Tensors kernel_amin(OpId op, const Tensors& in, const Attrs& attrs) { return {extreme<Min>(op, in, attrs)}; }
Tensors kernel_argmax(OpId op, const Tensors& in, const Attrs& attrs) { return {arg_extreme<true>(op, in, attrs)}; }
Tensors kernel_argmin(OpId op, const Tensors& in, const Attrs& attrs) { return {arg_extreme<false>(op, in, attrs)}; }

}  // namespace kiln::cpu
