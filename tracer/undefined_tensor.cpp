#include "tracer/undefined_tensor.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <algorithm>

namespace kiln::tracing {

Tensor undefined_tensor(const Shape& sizes, DType dtype) {
#if defined(__linux__)
  // One per thread: in-place kernels write into it, and two recordings at once must not race on it.
  thread_local void* base = nullptr;
  thread_local size_t size = 0;
  const size_t nbytes = size_t(numel_of(sizes)) * itemsize(dtype);
  if (nbytes > size) {
    // An outgrown mapping stays: tensors on it may still be alive. Doubling bounds the total at twice the
    // largest output.
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t want = std::max({nbytes, 2 * size, size_t(1) << 20});
    want = (want + page - 1) / page * page;
    void* p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return Tensor::empty(sizes, dtype);
    base = p;
    size = want;
  }
  return Tensor::from_blob(base, sizes, dtype);
#else
  return Tensor::empty(sizes, dtype);
#endif
}

}  // namespace kiln::tracing
