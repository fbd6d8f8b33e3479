// The 8-op chain y = sigmoid(tanh(x*1.5+0.5)*x) + exp(x)*0.1 - x written by hand as one fused loop,
// compiled with g++ -O3 -march=native -ffast-math -fopenmp (bench/meson.build): GCC vectorises expf
// and tanhf into glibc's libmvec. The yardstick for the x86 JIT's generated kernel (bench_x86.cpp).
#include <cmath>
#include <cstdint>

// Built twice: as kiln_chain_reference (-march=native) and, with -mno-avx512f, as
// kiln_chain_reference_avx2 (the yardstick for the JIT's AVX2 path).
#ifndef KILN_CHAIN_NAME
#define KILN_CHAIN_NAME kiln_chain_reference
#endif

void KILN_CHAIN_NAME(const float* __restrict x, float* __restrict y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float t = std::tanh(v * 1.5f + 0.5f) * v;
    y[i] = 1.0f / (1.0f + std::exp(-t)) + std::exp(v) * 0.1f - v;
  }
}
