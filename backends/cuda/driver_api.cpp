#include "backends/cuda/driver_api.h"

#include <dlfcn.h>

#include "core/error.h"
#include "core/load_once.h"

namespace kiln::cuda {
namespace {
#define KILN_STR(x) #x
#define KILN_XSTR(x) KILN_STR(x)  // expands cuda.h's cuMemAlloc → cuMemAlloc_v2 first
}  // namespace

DriverApi load_driver(const std::string& library) {
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) fail("cuda: no driver found ({})", library);
  DriverApi api;
#define KILN_CU_FN(name)                                                                    \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(h, KILN_XSTR(name)));              \
  if (!api.name) fail("cuda: the driver in {} lacks {}", library, KILN_XSTR(name));
#include "backends/cuda/driver_functions.def"
  return api;
}

const DriverApi& driver() {
  return load_once<DriverApi>([] {
    DriverApi api = load_driver("libcuda.so.1");
    CUresult r = api.cuInit(0);
    if (r != CUDA_SUCCESS) {
      const char* name = "unknown";
      api.cuGetErrorName(r, &name);
      fail("cuda: cuInit failed: {}", name);
    }
    return api;
  });
}

void check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = "unknown";
  const char* desc = "";
  driver().cuGetErrorName(r, &name);
  driver().cuGetErrorString(r, &desc);
  fail("cuda: {} failed: {} ({})", call, name, desc ? desc : "");
}

}  // namespace kiln::cuda
