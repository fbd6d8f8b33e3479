#pragma once
// The attention tiles' products over bf16 on AMX (tdpbf16ps: a 16x16 float tile gains a 16x32 by 32x16 bf16
// product). On this CPU family vdpbf16ps runs at half the float FMA rate, so AVX512_BF16 alone gains
// nothing; AMX runs the same product ~8x faster than float FMAs. Operands are "pairs": one uint32 holds two
// bf16 of the summed dimension, the lower index in the low half (AMX's VNNI layout). The sums are float;
// probabilities and score gradients enter rounded to bf16, as in torch's CPU flash attention for bf16.
#include <cstdint>

namespace kiln::cpu::amx_bf16 {

// AMX-BF16 present and granted by the kernel (arch_prctl ARCH_REQ_XCOMP_PERM, asked once), AVX512_BF16 too
bool available();

// c[m * ldc + n] (+)= sum over kk < K2 of pair a[m * lda + kk] . pair b[kk * ldb + n], for m < M and n < N;
// N a multiple of 16, K2 at most 16 or a multiple of 16 (pad packed operands with zero pairs). Loads its own
// tile configuration (oneDNN's AMX kernels configure theirs per call).
void tile(int64_t M, int64_t N, int64_t K2, const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate);

// Returns the calling thread's tiles to their initial state (the OS then saves no tile data on a switch).
void release();

// Rows 2i and 2i + 1 of bf16 rows (n rows of w, row stride ld) as one row of pairs: dst[i * ldd + c] pairs
// src[2i][c] with src[2i + 1][c]; an odd n's last pair has zero in its high half.
void pair_rows(const uint16_t* src, int64_t ld, int64_t n, int64_t w, uint32_t* dst, int64_t ldd);

// The same from float rows, rounded to bf16 (nearest even); w a multiple of 16.
void pair_rows(const float* src, int64_t ld, int64_t n, int64_t w, uint32_t* dst, int64_t ldd);

}  // namespace kiln::cpu::amx_bf16
