#include "eager/cpu/attention_amx.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "eager/cpu/bf16_convert.h"

// Built with the target attribute per function, not a file-wide flag: inline functions from headers
// instantiated here must not carry AVX-512 or AMX into the rest of the program (the linker keeps one copy).
#define KILN_BF16_TARGET __attribute__((target("avx512bf16,avx512bw,avx512vl,avx512dq,avx512f")))
#define KILN_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512bf16,avx512bw,avx512vl,avx512dq,avx512f")))

namespace kiln::cpu::amx_bf16 {
namespace {

bool detect() {
  const char* off = std::getenv("KILN_CPU_AMX");
  if (off && std::strcmp(off, "0") == 0) return false;
  if (!cpu_has_avx512_bf16()) return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool bf16 = (d >> 22) & 1u, tile = (d >> 24) & 1u;
  if (!bf16 || !tile) return false;
  // Linux hands out the tile data state only on request (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
  constexpr long kReqPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqPerm, kXtileData) == 0;
}

// palette 1: C in tiles 0-3 (two row tiles by two column tiles of 16 floats), A's two row tiles in 4 and 5,
// B's two column tiles in 6 and 7 — four independent products a step, where one waits out the previous
// one's latency
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// rows of C's two row tiles (mr1 0: none), pairs a step
TileConfig config(int64_t mr0, int64_t mr1, int64_t kr) {
  TileConfig cfg;
  auto set = [&](int t, int64_t rows, int64_t bytes) {
    cfg.rows[t] = uint8_t(rows);
    cfg.colsb[t] = uint16_t(bytes);
  };
  set(0, mr0, 64);
  set(1, mr0, 64);
  set(4, mr0, 4 * kr);
  if (mr1 > 0) {
    set(2, mr1, 64);
    set(3, mr1, 64);
    set(5, mr1, 4 * kr);
  }
  set(6, kr, 64);
  set(7, kr, 64);
  return cfg;
}

// The configuration this thread loaded last, until release(): loading one costs about as much as a
// product, and the attention's tiles keep one shape through a call (nothing else runs AMX inside it).
thread_local TileConfig t_loaded;
thread_local bool t_configured = false;

KILN_AMX_TARGET void load(const TileConfig& cfg) {
  if (t_configured && std::memcmp(&cfg, &t_loaded, sizeof cfg) == 0) return;
  _tile_loadconfig(&cfg);
  t_loaded = cfg;
  t_configured = true;
}

}  // namespace

bool available() {
  static const bool ok = detect();
  return ok;
}

KILN_AMX_TARGET void tile(int64_t M, int64_t N, int64_t K2, const uint32_t* a, int64_t lda, const uint32_t* b,
                          int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  const int64_t kr = std::min<int64_t>(16, K2);
  const long sa = long(lda * 4), sb = long(ldb * 4), sc = long(ldc * 4);
  for (int64_t m0 = 0; m0 < M; m0 += 32) {
    // loading a configuration zeroes every tile: only between rows of C
    const int64_t mr0 = std::min<int64_t>(16, M - m0), mr1 = std::clamp<int64_t>(M - m0 - 16, 0, 16);
    load(config(mr0, mr1, kr));
    const uint32_t *a0 = a + m0 * lda, *a1 = a0 + 16 * lda;
    for (int64_t n0 = 0; n0 < N; n0 += 32) {
      const bool two = N - n0 >= 32;
      float *c0 = c + m0 * ldc + n0, *c1 = c0 + 16 * ldc;
      if (accumulate) {
        _tile_loadd(0, c0, sc);
        if (two) _tile_loadd(1, c0 + 16, sc);
        if (mr1) _tile_loadd(2, c1, sc);
        if (mr1 && two) _tile_loadd(3, c1 + 16, sc);
      } else {
        _tile_zero(0);
        if (two) _tile_zero(1);
        if (mr1) _tile_zero(2);
        if (mr1 && two) _tile_zero(3);
      }
      for (int64_t k0 = 0; k0 < K2; k0 += 16) {
        _tile_loadd(4, a0 + k0, sa);
        _tile_loadd(6, b + k0 * ldb + n0, sb);
        _tile_dpbf16ps(0, 4, 6);
        if (two) {
          _tile_loadd(7, b + k0 * ldb + n0 + 16, sb);
          _tile_dpbf16ps(1, 4, 7);
        }
        if (mr1) {
          _tile_loadd(5, a1 + k0, sa);
          _tile_dpbf16ps(2, 5, 6);
          if (two) _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, c0, sc);
      if (two) _tile_stored(1, c0 + 16, sc);
      if (mr1) _tile_stored(2, c1, sc);
      if (mr1 && two) _tile_stored(3, c1 + 16, sc);
    }
  }
}

KILN_AMX_TARGET void release() {
  if (t_configured) _tile_release();
  t_configured = false;
}

namespace {

// lanes 0-15 of lo and hi interleaved: lo0, hi0, lo1, hi1, ...
KILN_BF16_TARGET __m512i interleave_index() {
  alignas(64) static const int16_t idx[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                              8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_load_si512(idx);
}

}  // namespace

KILN_BF16_TARGET void pair_rows(const uint16_t* src, int64_t ld, int64_t n, int64_t w, uint32_t* dst, int64_t ldd) {
  for (int64_t i = 0; 2 * i < n; ++i) {
    const uint16_t* r0 = src + 2 * i * ld;
    const uint16_t* r1 = 2 * i + 1 < n ? r0 + ld : nullptr;
    for (int64_t c = 0; c < w; c += 16) {
      const __mmask16 m = __mmask16(w - c >= 16 ? 0xffff : (1u << (w - c)) - 1);
      // the zero-masking forms: GCC 12's unmasked ones read an "undefined" register -Wmaybe-uninitialized flags
      const __m512i lo = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, r0 + c));
      const __m512i hi = r1 ? _mm512_maskz_slli_epi32(m, _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, r1 + c)), 16)
                            : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(dst + i * ldd + c, m, _mm512_or_si512(lo, hi));
    }
  }
}

KILN_BF16_TARGET void pair_rows(const float* src, int64_t ld, int64_t n, int64_t w, uint32_t* dst, int64_t ldd) {
  const __m512i idx = interleave_index();
  for (int64_t i = 0; 2 * i < n; ++i) {
    const float* r0 = src + 2 * i * ld;
    const float* r1 = 2 * i + 1 < n ? r0 + ld : nullptr;
    for (int64_t c = 0; c < w; c += 16) {
      const __m512 hi = r1 ? _mm512_loadu_ps(r1 + c) : _mm512_setzero_ps();
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, _mm512_loadu_ps(r0 + c));  // lo's 16, then hi's
      _mm512_storeu_si512(dst + i * ldd + c, _mm512_permutexvar_epi16(idx, both));
    }
  }
}

}  // namespace kiln::cpu::amx_bf16
