#pragma once
// bfloat16 GEMM through oneDNN's matmul primitive (bf16 source and weights, f32 accumulation, bf16
// result), one primitive per shape and layout, cached per thread. Where oneDNN has only its reference
// kernel for bf16 on this CPU (no AVX-512), or kiln is built without oneDNN, it declines and the
// caller computes in float32.
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/shape.h"

namespace kiln::cpu {

// Row-major C[M,N] = A[M,K]·B[K,N], each operand read transposed when its flag is set. Returns false,
// having written nothing, when no fast bf16 kernel exists here.
bool gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const BFloat16* A, int64_t lda, const BFloat16* B,
               int64_t ldb, BFloat16* C, int64_t ldc);
// As gemm_bf16 over leading batch dims `batch` at once: A's and B's strides along them in sa and sb
// (elements; 0: shared along that dim), C dense over them with rows ldc apart. One oneDNN call instead of one
// per matrix: attention's per-head products were ~1000 small GEMMs a GPT step.
bool gemm_bf16_batched(const Shape& batch, const Shape& sa, const Shape& sb, bool ta, bool tb, int64_t M, int64_t N,
                       int64_t K, const BFloat16* A, int64_t lda, const BFloat16* B, int64_t ldb, BFloat16* C,
                       int64_t ldc);
// The oneDNN implementation a bf16 [m,k]·[k,n] matmul gets here ("brg:avx512_core_amx", ...), or why
// there is none ("none: ref:any only").
// Whether gemm_bf16 has a fast kernel on this CPU at all (asked of oneDNN once).
bool bf16_gemm_available();
std::string bf16_matmul_impl(int64_t m = 64, int64_t n = 256, int64_t k = 784);

}  // namespace kiln::cpu
