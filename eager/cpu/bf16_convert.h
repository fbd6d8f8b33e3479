#pragma once
// float32 <-> bfloat16 over contiguous buffers: AVX512_BF16's vcvtne2ps2bf16 where the CPU has it
// (chosen at run time by cpuid), a round-to-nearest-even loop elsewhere. Both round like
// kiln::BFloat16(float) and keep NaN a quiet NaN; the instruction also flushes float32 denormals
// (below 1.2e-38) to a signed zero, where the loop rounds them to bf16 denormals.
#include <cstdint>

namespace kiln::cpu {

bool cpu_has_avx512_bf16();  // cpuid leaf 7 subleaf 1, EAX bit 5, plus AVX-512 F/BW
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n);
// The portable loops, also the reference the vector path is tested against.
void f32_to_bf16_reference(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_reference(const uint16_t* src, float* dst, int64_t n);

}  // namespace kiln::cpu
