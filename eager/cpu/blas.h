#pragma once
// The one place kiln calls a GEMM library for the CPU's float GEMMs: oneDNN's sgemm where kiln is
// built with it (its threads are OpenMP's, the same pool as kiln's own kernels, where OpenBLAS's
// pthreads and an OpenMP pool spinning between regions fight over the cores), OpenBLAS otherwise.
#include <cstdint>

namespace kiln::cpu::blas {

// Row-major C = A·B + beta·C, A [M,K] and B [K,N] each read transposed when its flag is set.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc);
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
          int64_t ldb, double beta, double* C, int64_t ldc);

}  // namespace kiln::cpu::blas
