#include <cstdlib>
#include <cstring>

#include "eager/cpu/isa_kernels.h"

namespace kiln::cpu {

// KILN_CPU_ISA=baseline|avx2|avx512 caps the choice (for testing every build of the kernels).
const IsaKernels& isa_kernels() {
  static const IsaKernels* chosen = [] {
    const char* cap = std::getenv("KILN_CPU_ISA");
    if (cap && !*cap) cap = nullptr;  // set but empty: no cap
    auto allowed = [&](const char* name) { return !cap || std::strcmp(cap, name) == 0; };
    __builtin_cpu_init();
    if (allowed("avx512") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
      return &avx512::kernels;
    if ((allowed("avx2") || (cap && std::strcmp(cap, "avx512") == 0)) && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
      return &avx2::kernels;
    return &baseline::kernels;
  }();
  return *chosen;
}

}  // namespace kiln::cpu
