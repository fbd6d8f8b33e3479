#pragma once
// Run-time ISA detection for the x86 JIT backend.
#include <string_view>

namespace kiln::x86 {

enum class Isa { None, Avx2, Avx512 };

// What this CPU runs: Avx512 needs AVX-512 F+DQ+VL+BW (Skylake-SP and later), Avx2 needs AVX2+FMA+BMI2,
// None otherwise. The environment variable KILN_X86_ISA=avx2|avx512 caps the answer (never raises it);
// set_isa_cap() overrides the environment (tests use it to run the AVX2 path on an AVX-512 machine).
Isa best_isa();
Isa cpu_isa();                 // what the CPU has, ignoring caps
void set_isa_cap(Isa cap);     // Isa::None clears the override (back to the environment)
// AVX512_BF16 (vcvtneps2bf16): the AVX-512 kernels round to bf16 with it, as eager's casts do on such a CPU.
bool cpu_avx512_bf16();
std::string_view isa_name(Isa isa);

}  // namespace kiln::x86
