#include "eager/cpu/onednn_switch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kiln_config.h"

namespace kiln::cpu {

namespace {
// -1: not decided yet (read KILN_ONEDNN_GEMM on first use); 0 off; 1 on.
std::atomic<int> g_enabled{-1};
}  // namespace

bool onednn_gemm_enabled() {
#if KILN_HAVE_DNNL
  int e = g_enabled.load(std::memory_order_relaxed);
  if (e < 0) {
    const char* env = std::getenv("KILN_ONEDNN_GEMM");
    e = env && std::strcmp(env, "0") == 0 ? 0 : 1;
    g_enabled.store(e, std::memory_order_relaxed);
  }
  return e == 1;
#else
  return false;
#endif
}

void set_onednn_gemm(bool on) { g_enabled.store(on ? 1 : 0, std::memory_order_relaxed); }

bool onednn_reference_impl(std::string_view impl) { return impl.substr(0, 3) == "ref" || impl.find(":ref") != impl.npos; }

}  // namespace kiln::cpu
