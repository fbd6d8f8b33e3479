#pragma once
// glibc's libmvec entry points, declared SIMD-callable (glibc declares them so only under -ffast-math) so that
// loops calling exp or log in the per-ISA kernel files vectorise at the ISA's width. Include only from files
// built with KILN_SIMD_MATH (eager/meson.build's per-ISA libraries).
#if KILN_SIMD_MATH
extern "C" {
#define KILN_SIMD(ret, name, ...) __attribute__((simd("notinbranch"))) ret name(__VA_ARGS__) noexcept;
KILN_SIMD(float, expf, float)
KILN_SIMD(double, exp, double)
KILN_SIMD(float, logf, float)
KILN_SIMD(double, log, double)
KILN_SIMD(float, log1pf, float)
KILN_SIMD(double, log1p, double)
KILN_SIMD(float, sinf, float)
KILN_SIMD(double, sin, double)
KILN_SIMD(float, cosf, float)
KILN_SIMD(double, cos, double)
KILN_SIMD(float, tanhf, float)
KILN_SIMD(double, tanh, double)
KILN_SIMD(float, erff, float)
KILN_SIMD(double, erf, double)
KILN_SIMD(float, powf, float, float)
KILN_SIMD(double, pow, double, double)
#undef KILN_SIMD
}
#endif
