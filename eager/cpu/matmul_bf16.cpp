#include "eager/cpu/matmul_bf16.h"

#include <map>
#include <vector>

#include "eager/cpu/onednn_switch.h"
#include "kiln_config.h"
#if KILN_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace kiln::cpu {

#if KILN_HAVE_DNNL
namespace {

// ta, tb, M, N, K, lda, ldb, ldc, then per batch dim its size and A's and B's strides there
using Key = std::vector<int64_t>;

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
  bool ta = k[0], tb = k[1];
  int64_t M = k[2], N = k[3], K = k[4], lda = k[5], ldb = k[6], ldc = k[7];
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // Batch dims lead; c is dense over them; a stride of 0 is an operand shared along that dim, which
  // oneDNN takes as a dim of 1 (broadcast).
  dims ad, as, bd, bs, cd, cs;
  int64_t batch = 1;
  for (size_t i = 8; i + 2 < k.size(); i += 3) batch *= k[i];
  int64_t c_stride = batch * M * N;
  for (size_t i = 8; i + 2 < k.size(); i += 3) {
    c_stride /= k[i];
    ad.push_back(k[i + 1] ? k[i] : 1), as.push_back(k[i + 1]);
    bd.push_back(k[i + 2] ? k[i] : 1), bs.push_back(k[i + 2]);
    cd.push_back(k[i]), cs.push_back(c_stride);
  }
  ad.insert(ad.end(), {M, K}), bd.insert(bd.end(), {K, N}), cd.insert(cd.end(), {M, N});
  as.insert(as.end(), {ta ? 1 : lda, ta ? lda : 1}), bs.insert(bs.end(), {tb ? 1 : ldb, tb ? ldb : 1});
  cs.insert(cs.end(), {ldc, 1});
  dnnl::memory::desc a(ad, dt::bf16, as), b(bd, dt::bf16, bs), c(cd, dt::bf16, cs);
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
  return gemm_bf16_batched({}, {}, {}, ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
}

bool gemm_bf16_batched(const Shape& batch, const Shape& sa, const Shape& sb, bool ta, bool tb, int64_t M, int64_t N,
                       int64_t K, const BFloat16* A, int64_t lda, const BFloat16* B, int64_t ldb, BFloat16* C,
                       int64_t ldc) {
  Key key{ta, tb, M, N, K, lda, ldb, ldc};
  for (size_t i = 0; i < batch.size(); ++i) key.insert(key.end(), {batch[i], sa[i], sb[i]});
  const Entry& e = entry(key);
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
bool gemm_bf16_batched(const Shape&, const Shape&, const Shape&, bool, bool, int64_t, int64_t, int64_t, const BFloat16*,
                       int64_t, const BFloat16*, int64_t, BFloat16*, int64_t) {
  return false;
}
bool bf16_gemm_available() { return false; }
std::string bf16_matmul_impl(int64_t, int64_t, int64_t) { return "none: built without oneDNN"; }

#endif

}  // namespace kiln::cpu
