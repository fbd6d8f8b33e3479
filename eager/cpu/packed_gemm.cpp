#include "eager/cpu/packed_gemm.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "eager/cpu/blas.h"
#include "eager/cpu/onednn_switch.h"
#include "kiln_config.h"
#if KILN_HAVE_DNNL
#include <dnnl.hpp>

#include "eager/cpu/onednn_scratchpad.h"
#endif

namespace kiln::cpu {

#if KILN_HAVE_DNNL
namespace {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// tb, M, N, K, ldb, accumulate, threads (a primitive is made for the threads it may use: a recurrent layer's
// split steps run one each inside a parallel region)
using Key = std::tuple<bool, int64_t, int64_t, int64_t, int64_t, bool, int>;

// A shape's primitives, made once per thread (a primitive may run only where it was made: onednn_scratchpad.h).
struct Prims {
  bool ok = false;
  dnnl::memory::desc a, b_user, b_packed, c, scratchpad;
  dnnl::matmul matmul;
  dnnl::reorder pack;
};

// Shared: a PackedGemm alive across a cache reset keeps its primitives.
int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

std::shared_ptr<const Prims> prims(const Key& k) {
  thread_local std::map<Key, std::shared_ptr<const Prims>> cache;
  if (auto it = cache.find(k); it != cache.end()) return it->second;
  if (cache.size() > 64) cache.clear();  // shapes that keep changing (a varying batch) would grow it without bound
  [[maybe_unused]] auto [tb, M, N, K, ldb, acc, threads] = k;
  using dt = dnnl::memory::data_type;
  Prims p;
  p.a = dnnl::memory::desc({M, K}, dt::f32, dnnl::memory::dims{K, 1});
  p.b_user = dnnl::memory::desc({K, N}, dt::f32, tb ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1});
  p.c = dnnl::memory::desc({M, N}, dt::f32, dnnl::memory::dims{N, 1});
  try {
    dnnl::primitive_attr attr = user_scratchpad();
    if (acc) {
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    dnnl::memory::desc b_any({K, N}, dt::f32, dnnl::memory::format_tag::any);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, b_any, p.c), attr, engine());
    // oneDNN's reference kernel is a scalar loop: sgemm is the better fallback there
    if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) {
      p.b_packed = pd.weights_desc();
      p.scratchpad = pd.scratchpad_desc();
      p.matmul = dnnl::matmul(pd);
      p.pack = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), p.b_user, engine(), p.b_packed));
      p.ok = true;
    }
  } catch (const dnnl::error&) {
    p.ok = false;  // oneDNN declined the shape or layout: blas::gemm
  }
  return cache.emplace(k, std::make_shared<const Prims>(std::move(p))).first->second;
}

}  // namespace

template <class T>
struct PackedGemm<T>::Packed {
  std::shared_ptr<const Prims> p;
  dnnl::memory b;
};
#else
template <class T>
struct PackedGemm<T>::Packed {};
#endif

template <class T>
PackedGemm<T>::PackedGemm(bool tb, int64_t M, int64_t N, int64_t K, const T* B, int64_t ldb, T beta)
    : tb_(tb), M_(M), N_(N), K_(K), ldb_(ldb), B_(B), beta_(beta) {
  if (beta != T(0) && beta != T(1)) fail("packed gemm: beta must be 0 or 1, got {}", double(beta));
#if KILN_HAVE_DNNL
  if constexpr (std::is_same_v<T, float>) {
    if (M <= 0 || N <= 0 || K <= 0 || !onednn_gemm_enabled()) return;
    std::shared_ptr<const Prims> shared = prims({tb, M, N, K, ldb, beta != T(0), max_threads()});
    const Prims& p = *shared;
    if (!p.ok) return;
    auto packed = std::make_unique<Packed>();
    packed->p = shared;
    packed->b = dnnl::memory(p.b_packed, engine());
    dnnl::memory user(p.b_user, engine(), const_cast<float*>(B));
    thread_local dnnl::stream s(engine());
    p.pack.execute(s, user, packed->b);
    s.wait();
    packed_ = std::move(packed);
  }
#endif
}

template <class T>
PackedGemm<T>::~PackedGemm() = default;

template <class T>
void PackedGemm<T>::operator()(const T* A, T* C, int64_t rows) const {
  if (rows <= 0) return;
#if KILN_HAVE_DNNL
  if constexpr (std::is_same_v<T, float>) {
    if (packed_ && rows == M_) {
      const Prims& p = *packed_->p;
      dnnl::memory a(p.a, engine(), const_cast<float*>(A)), c(p.c, engine(), C);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, packed_->b}, {DNNL_ARG_DST, c}};
      add_scratchpad(args, p.scratchpad, engine());
      thread_local dnnl::stream s(engine());
      p.matmul.execute(s, args);
      s.wait();
      return;
    }
  }
#endif
  blas::gemm(false, tb_, std::min(rows, M_), N_, K_, A, K_, B_, ldb_, beta_, C, N_);
}

template class PackedGemm<float>;
template class PackedGemm<double>;

}  // namespace kiln::cpu
