// Compiled three times with KILN_ISA = baseline | avx2 | avx512 and the matching -m flags (see
// eager/meson.build). Rows are written so GCC vectorises them; transcendental calls vectorise into
// glibc's libmvec (eager/cpu/simd_math.h declares them SIMD-callable, since glibc only does so under -ffast-math).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/scalar_math.h"
#include "eager/cpu/isa_kernels.h"
#include "eager/cpu/transpose_copy.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include "eager/cpu/simd_math.h"

namespace kiln::cpu::KILN_ISA {
namespace {

// Runs row(p, n, s) over the loop, split across threads in chunks of whole or partial rows.
template <int N, class Row>
void drive(const StridedLoop& L, Row row) {
  const int64_t numel = L.numel();
  if (numel == 0) return;
  const int64_t inner = L.sizes[0];
  auto run_range = [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxDims];
    char* p[N];
    int64_t rem = begin;
    for (int k = 0; k < N; ++k) p[k] = L.ptr[k];
    for (int d = 0; d < L.ndim; ++d) {
      idx[d] = rem % L.sizes[d];
      rem /= L.sizes[d];
      for (int k = 0; k < N; ++k) p[k] += idx[d] * L.strides[k][d];
    }
    int64_t s0[N];
    for (int k = 0; k < N; ++k) s0[k] = L.strides[k][0];
    for (int64_t pos = begin; pos < end;) {
      int64_t n = std::min(inner - idx[0], end - pos);
      row(p, n, s0);
      pos += n;
      idx[0] += n;
      for (int k = 0; k < N; ++k) p[k] += n * s0[k];
      if (idx[0] < inner) continue;
      idx[0] = 0;
      for (int k = 0; k < N; ++k) p[k] -= inner * s0[k];
      for (int d = 1; d < L.ndim; ++d) {
        for (int k = 0; k < N; ++k) p[k] += L.strides[k][d];
        if (++idx[d] < L.sizes[d]) break;
        idx[d] = 0;
        for (int k = 0; k < N; ++k) p[k] -= L.sizes[d] * L.strides[k][d];
      }
    }
  };
#ifdef _OPENMP
  int threads = omp_get_max_threads();
  if (threads > 1 && numel >= 2 * kParallelGrain && !omp_in_parallel()) {
    int64_t chunks = std::min<int64_t>(threads, numel / kParallelGrain);
#pragma omp parallel for num_threads(int(chunks)) schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      // Chunk bounds on 64-element boundaries keep rows aligned for the vector loops.
      int64_t b = (numel * c / chunks) & ~int64_t(63);
      int64_t e = c + 1 == chunks ? numel : (numel * (c + 1) / chunks) & ~int64_t(63);
      run_range(b, e);
    }
    return;
  }
#endif
  run_range(0, numel);
}

#include "core/scalar_functors.inc"

// Outputs larger than the caches are written with non-temporal stores: a plain store first reads
// the destination line (write-allocate), so streaming saves a third of an add's memory traffic.
constexpr int64_t kStreamBytes = int64_t(16) << 20;

void stream_copy(char* dst, const char* src, size_t bytes) {
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 64 <= bytes; i += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_load_si512(reinterpret_cast<const void*>(src + i)));
#elif defined(__AVX2__)
  for (; i + 32 <= bytes; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_load_si256(reinterpret_cast<const __m256i*>(src + i)));
#else
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), _mm_load_si128(reinterpret_cast<const __m128i*>(src + i)));
#endif
  std::memcpy(dst + i, src + i, bytes - i);
}

// Runs body(dst, i0, len), which fills dst[0, len) with outputs i0.., either straight into o or, when
// streaming, through a cache-resident block that is then streamed out.
template <class O, class Body>
void write_row(O* o, int64_t n, bool stream, Body body) {
  if (!stream || (reinterpret_cast<uintptr_t>(o) & 63) != 0) return body(o, 0, n);
  constexpr int64_t kBlock = 8192 / int64_t(sizeof(O));
  alignas(64) O tmp[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    int64_t len = std::min(kBlock, n - i0);
    body(tmp, i0, len);
    stream_copy(reinterpret_cast<char*>(o + i0), reinterpret_cast<const char*>(tmp), size_t(len) * sizeof(O));
  }
  _mm_sfence();
}

template <class T, class F>
using OutOf = std::conditional_t<std::is_same_v<decltype(std::declval<F>()(std::declval<T>())), bool>, bool, T>;

template <class T, class F>
void unary_loop(const StridedLoop& L, F f) {
  using O = OutOf<T, F>;
  const bool stream = L.numel() * int64_t(sizeof(O)) >= kStreamBytes;
  drive<2>(L, [f, stream](char** p, int64_t n, const int64_t* s) {
    if (s[0] == sizeof(O) && s[1] == sizeof(T)) {
      const T* __restrict x = reinterpret_cast<const T*>(p[1]);
      write_row(reinterpret_cast<O*>(p[0]), n, stream, [&](O* __restrict o, int64_t i0, int64_t len) {
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) o[i] = O(f(x[i0 + i]));
      });
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<O*>(p[0] + i * s[0]) = O(f(*reinterpret_cast<const T*>(p[1] + i * s[1])));
    }
  });
}

template <class T, class F>
void binary_loop(const StridedLoop& L, F f) {
  using R = decltype(f(T(), T()));
  using O = std::conditional_t<std::is_same_v<R, bool>, bool, T>;
  const bool stream = L.numel() * int64_t(sizeof(O)) >= kStreamBytes;
  drive<3>(L, [f, stream](char** p, int64_t n, const int64_t* s) {
    O* out = reinterpret_cast<O*>(p[0]);
    const T* __restrict a = reinterpret_cast<const T*>(p[1]);
    const T* __restrict b = reinterpret_cast<const T*>(p[2]);
    if (s[0] == sizeof(O) && s[1] == sizeof(T) && s[2] == sizeof(T)) {
      write_row(out, n, stream, [&](O* __restrict o, int64_t i0, int64_t len) {
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) o[i] = O(f(a[i0 + i], b[i0 + i]));
      });
    } else if (s[0] == sizeof(O) && s[1] == sizeof(T) && s[2] == 0) {
      const T bv = *b;
      write_row(out, n, stream, [&](O* __restrict o, int64_t i0, int64_t len) {
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) o[i] = O(f(a[i0 + i], bv));
      });
    } else if (s[0] == sizeof(O) && s[1] == 0 && s[2] == sizeof(T)) {
      const T av = *a;
      write_row(out, n, stream, [&](O* __restrict o, int64_t i0, int64_t len) {
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) o[i] = O(f(av, b[i0 + i]));
      });
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<O*>(p[0] + i * s[0]) =
            O(f(*reinterpret_cast<const T*>(p[1] + i * s[1]), *reinterpret_cast<const T*>(p[2] + i * s[2])));
    }
  });
}

// Compute types the kernels see: half types are widened to float32 before reaching here.
template <class G>
void visit_compute(DType t, bool floats_only, G&& g) {
  switch (t) {
    case DType::Float32: return g(float{});
    case DType::Float64: return g(double{});
    case DType::Int32: if (!floats_only) return g(int32_t{}); break;
    case DType::Int64: if (!floats_only) return g(int64_t{}); break;
    case DType::Bool: if (!floats_only) return g(bool{}); break;
    case DType::BFloat16:
    case DType::Float16: break;
  }
  fail("elementwise: no {} kernel for dtype {}", KILN_ISA_NAME, dtype_name(t));
}

void unary(OpId op, DType t, const StridedLoop& L) {
  switch (op) {
#define KILN_UNARY(Id, name, rule, expr)                                                     \
  case OpId::Id:                                                                             \
    return visit_compute(t, DTypeRule::rule == DTypeRule::Float,                             \
                         [&](auto v) { unary_loop<decltype(v)>(L, Fn_##Id{}); });
#define KILN_OTHER(Id) \
  case OpId::Id:       \
    break;
#include "core/ops.def"
  }
  fail("elementwise: {} is not a unary op", op_name(op));
}

void binary(OpId op, DType t, const StridedLoop& L) {
  switch (op) {
#define KILN_BINARY(Id, name, rule, expr)                                                    \
  case OpId::Id:                                                                             \
    return visit_compute(t, DTypeRule::rule == DTypeRule::Float,                             \
                         [&](auto v) { binary_loop<decltype(v)>(L, Fn_##Id{}); });
#define KILN_OTHER(Id) \
  case OpId::Id:       \
    break;
#include "core/ops.def"
  }
  fail("elementwise: {} is not a binary op", op_name(op));
}

void where(DType t, const StridedLoop& L) {
  visit_dtype(t, [&](auto v) {
    using T = decltype(v);
    drive<4>(L, [](char** p, int64_t n, const int64_t* s) {
      if (s[0] == sizeof(T) && s[1] == 1 && s[2] == sizeof(T) && s[3] == sizeof(T)) {
        T* __restrict o = reinterpret_cast<T*>(p[0]);
        const bool* __restrict c = reinterpret_cast<const bool*>(p[1]);
        const T* __restrict a = reinterpret_cast<const T*>(p[2]);
        const T* __restrict b = reinterpret_cast<const T*>(p[3]);
        for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? a[i] : b[i];
      } else {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const bool*>(p[1] + i * s[1])
                                                       ? *reinterpret_cast<const T*>(p[2] + i * s[2])
                                                       : *reinterpret_cast<const T*>(p[3] + i * s[3]);
      }
    });
  });
}

template <class To, class From>
To convert(From x) {
  if constexpr (std::is_same_v<To, From>) return x;
  else if constexpr (std::is_same_v<To, bool>) return float(x) != 0.0f || double(x) != 0.0;
  else if constexpr (std::is_same_v<To, BFloat16> || std::is_same_v<To, Float16>) return To(float(x));
  else if constexpr (std::is_same_v<From, BFloat16> || std::is_same_v<From, Float16>) return To(float(x));
  else return To(x);
}

void cast(DType to, DType from, const StridedLoop& L) {
  if (to == from && transpose_copy(L, itemsize(to))) return;
  visit_dtype(to, [&](auto tv) {
    visit_dtype(from, [&](auto fv) {
      using To = decltype(tv);
      using From = decltype(fv);
      drive<2>(L, [](char** p, int64_t n, const int64_t* s) {
        if (s[0] == sizeof(To) && s[1] == sizeof(From)) {
          if constexpr (std::is_same_v<To, From>) {
            std::memcpy(p[0], p[1], size_t(n) * sizeof(To));
          } else {
            // bool goes through its byte (0 or 1): GCC leaves a loop that loads or stores bool scalar,
            // which made bool -> float (relu's gradient mask) 4x slower than float -> double.
            using ToByte = std::conditional_t<std::is_same_v<To, bool>, uint8_t, To>;
            using FromByte = std::conditional_t<std::is_same_v<From, bool>, uint8_t, From>;
            ToByte* __restrict o = reinterpret_cast<ToByte*>(p[0]);
            const FromByte* __restrict x = reinterpret_cast<const FromByte*>(p[1]);
            for (int64_t i = 0; i < n; ++i) o[i] = ToByte(convert<To>(x[i]));
          }
        } else if (s[0] == sizeof(To) && s[1] == 0) {
          To* __restrict o = reinterpret_cast<To*>(p[0]);
          const To v = convert<To>(*reinterpret_cast<const From*>(p[1]));
          for (int64_t i = 0; i < n; ++i) o[i] = v;
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<To*>(p[0] + i * s[0]) = convert<To>(*reinterpret_cast<const From*>(p[1] + i * s[1]));
        }
      });
    });
  });
}

}  // namespace

const IsaKernels kernels{KILN_ISA_NAME, &unary, &binary, &where, &cast, &fused_sgd, &fused_adam, &attention_forward, &attention_backward,
                          &lstm_forward_row, &lstm_backward_row};

}  // namespace kiln::cpu::KILN_ISA
