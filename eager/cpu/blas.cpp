#include "eager/cpu/blas.h"
#include "eager/cpu/gemm_warm_up.h"

#include <cblas.h>
#include <omp.h>

#include <mutex>
#if defined(__linux__)
#include <sched.h>
#endif
#include <thread>
#include <vector>

#include "kiln_config.h"
#if KILN_HAVE_DNNL
#include <dnnl.h>
#endif

#include "core/error.h"

namespace kiln::cpu::blas {

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc) {
#if KILN_HAVE_DNNL
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  if (st != dnnl_success) fail("gemm: dnnl_sgemm failed with status {} for [{},{}] @ [{},{}]", int(st), M, K, K, N);
#else
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0f, A, int(lda), B, int(ldb), beta, C, int(ldc));
#endif
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
          int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0, A, int(lda), B, int(ldb), beta, C, int(ldc));
}

#if KILN_HAVE_DNNL
namespace {

// The set-up thread, joined once by whichever comes first of the two below.
struct WarmUp {
  std::mutex mu;
  std::thread t;
  void join() {
    std::lock_guard<std::mutex> lock(mu);
    if (t.joinable()) t.join();
  }
};

WarmUp& warm_up() {
  static WarmUp* w = new WarmUp;  // never destroyed: a thread left running must not meet a destroyed std::thread
  return *w;
}

// oneDNN makes statics of its own during the set-up, after anything of kiln's, so they are destroyed at exit
// before any static of kiln's could join the thread: a process that exits while the set-up runs (a tool that
// only builds a model) would have it use them destroyed. exit() runs the exiting thread's thread-local
// destructors before any static one, so the thread that started the set-up (main, as a rule) waits for it
// there.
struct JoinAtThreadExit {
  ~JoinAtThreadExit() { warm_up().join(); }
};

}  // namespace
#endif

void warm_up_in_background() {
#if KILN_HAVE_DNNL
  static std::once_flag once;
  std::call_once(once, [] {
    thread_local JoinAtThreadExit join_at_exit;
    (void)join_at_exit;
    // a program that exits from another thread: joined among the statics, as well as it can be
    static JoinAtThreadExit join_among_statics;
    (void)join_among_statics;
    std::lock_guard<std::mutex> lock(warm_up().mu);
    warm_up().t = std::thread([] {
      omp_set_num_threads(1);  // this thread's own OpenMP team: none, no workers left spinning
      std::vector<float> a(64 * 64), c(64 * 64);
      dnnl_sgemm('N', 'N', 64, 64, 64, 1.0f, a.data(), 64, a.data(), 64, 0.0f, c.data(), 64);
    });
  });
#endif
}

void warm_up_on_a_spare_core() {
#if KILN_HAVE_DNNL && defined(__linux__)
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) > omp_get_max_threads()) warm_up_in_background();
#endif
}

}  // namespace kiln::cpu::blas
