#include "eager/cpu/bf16_convert.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cstring>

#include "core/dtype.h"

namespace kiln::cpu {
namespace {

bool detect_avx512_bf16() {
  __builtin_cpu_init();  // this runs as a static initialiser, possibly before libgcc's own
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  bool bf16 = (a >> 5) & 1u;
  // __builtin_cpu_supports also checks that the OS saves the AVX-512 state (xgetbv).
  return bf16 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

__attribute__((target("avx512bf16,avx512bw,avx512f,avx512vl"))) void f32_to_bf16_avx512(const float* src,
                                                                                          uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
    __m512bh packed = _mm512_cvtne2ps_pbh(hi, lo);  // lanes 0-15 from lo, 16-31 from hi
    _mm512_storeu_si512(reinterpret_cast<void*>(dst + i), reinterpret_cast<__m512i>(packed));
  }
  if (i < n) {
    __mmask16 m0 = __mmask16((1u << std::min<int64_t>(16, n - i)) - 1);
    __m512 lo = _mm512_maskz_loadu_ps(m0, src + i);
    __m256bh p0 = _mm512_cvtneps_pbh(lo);
    _mm256_mask_storeu_epi16(dst + i, m0, reinterpret_cast<__m256i>(p0));
    if (n - i > 16) {
      __mmask16 m1 = __mmask16((1u << (n - i - 16)) - 1);
      __m512 hi = _mm512_maskz_loadu_ps(m1, src + i + 16);
      __m256bh p1 = _mm512_cvtneps_pbh(hi);
      _mm256_mask_storeu_epi16(dst + i + 16, m1, reinterpret_cast<__m256i>(p1));
    }
  }
}

__attribute__((target("avx512bw,avx512f"))) void bf16_to_f32_avx512(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) {
    uint32_t u = uint32_t(src[i]) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

const bool g_has_avx512_bf16 = detect_avx512_bf16();

}  // namespace

bool cpu_has_avx512_bf16() { return g_has_avx512_bf16; }

void f32_to_bf16_reference(const float* src, uint16_t* dst, int64_t n) {
  // BFloat16(float)'s rounding, written so the compiler vectorises it: add half an ulp plus the kept
  // lowest bit (ties go to even) and truncate; a NaN is quieted keeping sign and payload, as
  // vcvtne2ps2bf16 does.
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    dst[i] = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t((u >> 16) | 0x40u) : uint16_t(r);
  }
}

void bf16_to_f32_reference(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = uint32_t(src[i]) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  if (g_has_avx512_bf16) return f32_to_bf16_avx512(src, dst, n);
  f32_to_bf16_reference(src, dst, n);
}

void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  if (g_has_avx512_bf16) return bf16_to_f32_avx512(src, dst, n);
  bf16_to_f32_reference(src, dst, n);
}

}  // namespace kiln::cpu
