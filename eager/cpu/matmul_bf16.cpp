#include "eager/cpu/matmul_bf16.h"

#include <map>
#include <tuple>

#include "eager/cpu/onednn_switch.h"
#include "kiln_config.h"
#if KILN_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace kiln::cpu {

#if KILN_HAVE_DNNL
namespace {

using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

struct Entry {
  bool ok = false;
  std::string impl;
  dnnl::memory::desc a, b, c;
  dnnl::matmul prim;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Entry make(const Key& k) {
  auto [ta, tb, M, N, K, lda, ldb, ldc] = k;
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc a({M, K}, dt::bf16, ta ? dnnl::memory::dims{1, lda} : dnnl::memory::dims{lda, 1});
  dnnl::memory::desc b({K, N}, dt::bf16, tb ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1});
  dnnl::memory::desc c({M, N}, dt::bf16, dnnl::memory::dims{ldc, 1});
  Entry e;
  e.a = a;
  e.b = b;
  e.c = c;
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine());
    e.impl = pd.impl_info_str();
    if (onednn_reference_impl(e.impl)) return e;
    e.prim = dnnl::matmul(pd);
    e.ok = true;
  } catch (const dnnl::error& err) {
    e.impl = std::string("oneDNN has no bf16 matmul for this CPU: ") + err.what();
  }
  return e;
}

const Entry& entry(const Key& k) {
  thread_local std::map<Key, Entry> cache;
  auto it = cache.find(k);
  if (it == cache.end()) it = cache.emplace(k, make(k)).first;
  return it->second;
}

}  // namespace

bool gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const BFloat16* A, int64_t lda, const BFloat16* B,
               int64_t ldb, BFloat16* C, int64_t ldc) {
  const Entry& e = entry({ta, tb, M, N, K, lda, ldb, ldc});
  if (!e.ok) return false;
  dnnl::memory a(e.a, engine(), const_cast<BFloat16*>(A));
  dnnl::memory b(e.b, engine(), const_cast<BFloat16*>(B));
  dnnl::memory c(e.c, engine(), C);
  thread_local dnnl::stream s(engine());
  e.prim.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  s.wait();
  return true;
}

bool bf16_gemm_available() {
  static const bool ok = entry({false, false, 64, 256, 784, 784, 256, 256}).ok;
  return ok;
}

std::string bf16_matmul_impl(int64_t m, int64_t n, int64_t k) {
  const Entry& e = entry({false, false, m, n, k, k, n, n});
  return e.ok ? e.impl : "none: " + e.impl;
}

#else

bool gemm_bf16(bool, bool, int64_t, int64_t, int64_t, const BFloat16*, int64_t, const BFloat16*, int64_t, BFloat16*,
               int64_t) {
  return false;
}
bool bf16_gemm_available() { return false; }
std::string bf16_matmul_impl(int64_t, int64_t, int64_t) { return "none: built without oneDNN"; }

#endif

}  // namespace kiln::cpu
