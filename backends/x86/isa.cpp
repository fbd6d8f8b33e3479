#include "backends/x86/isa.h"

#include <xbyak/xbyak_util.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kiln::x86 {
namespace {
std::atomic<int> g_cap{-1};  // -1: use the environment

Isa detect() {
  using C = Xbyak::util::Cpu;
  C cpu;
  bool avx2 = cpu.has(C::tAVX2) && cpu.has(C::tFMA) && cpu.has(C::tBMI2) && cpu.has(C::tF16C);
  if (!avx2) return Isa::None;
  if (cpu.has(C::tAVX512F) && cpu.has(C::tAVX512DQ) && cpu.has(C::tAVX512VL) && cpu.has(C::tAVX512BW))
    return Isa::Avx512;
  return Isa::Avx2;
}

Isa env_cap() {
  const char* e = std::getenv("KILN_X86_ISA");
  if (!e) return Isa::Avx512;
  if (std::strcmp(e, "avx2") == 0) return Isa::Avx2;
  if (std::strcmp(e, "none") == 0) return Isa::None;
  return Isa::Avx512;
}
}  // namespace

Isa cpu_isa() {
  static const Isa isa = detect();
  return isa;
}

bool cpu_avx512_bf16() {
  static const bool has = [] {
    Xbyak::util::Cpu cpu;
    return cpu.has(Xbyak::util::Cpu::tAVX512_BF16);
  }();
  return has;
}

Isa best_isa() {
  int c = g_cap.load(std::memory_order_relaxed);
  Isa cap = c < 0 ? env_cap() : Isa(c);
  Isa have = cpu_isa();
  return int(cap) < int(have) ? cap : have;
}

void set_isa_cap(Isa cap) { g_cap.store(cap == Isa::None ? -1 : int(cap), std::memory_order_relaxed); }

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::None: return "none";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

}  // namespace kiln::x86
