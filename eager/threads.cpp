#include <cblas.h>
#include <omp.h>

#include "eager/ops.h"

namespace kiln {

void set_num_threads(int n) {
  if (n < 1) fail("set_num_threads: expected a positive count, got {}", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace kiln
