#include "eager/cpu/blas.h"
#include "eager/cpu/gemm_warm_up.h"

#include <cblas.h>
#include <omp.h>

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

void warm_up_in_background() {
#if KILN_HAVE_DNNL
  // joined at exit, before oneDNN's own statics go
  struct Joined {
    std::thread t;
    ~Joined() {
      if (t.joinable()) t.join();
    }
  };
  static Joined warm{std::thread([] {
    omp_set_num_threads(1);  // this thread's own OpenMP team: none, no workers left spinning
    std::vector<float> a(64 * 64), c(64 * 64);
    dnnl_sgemm('N', 'N', 64, 64, 64, 1.0f, a.data(), 64, a.data(), 64, 0.0f, c.data(), 64);
  })};
#endif
}

}  // namespace kiln::cpu::blas
