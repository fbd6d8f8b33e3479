#include "backends/cuda/toolkit_api.h"

#include <cuda.h>
#include <dlfcn.h>

#include <string>

#include "core/error.h"
#include "core/load_once.h"
#include "kiln_config.h"

namespace kiln::cuda {
namespace {
#define KILN_STR(x) #x
#define KILN_XSTR(x) KILN_STR(x)  // expands cublas_v2.h's cublasCreate → cublasCreate_v2 first

// The major versions are the sonames' (libnvrtc.so.13, libcublas.so.13) of the headers compiled against.
const std::string kNvrtc = "libnvrtc.so." + std::to_string(CUDA_VERSION / 1000);
const std::string kCublas = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

void* open_library(const std::string& soname) {
  const std::string in_toolkit = std::string(KILN_CUDA_LIBDIR) + "/" + soname;
  if (void* h = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  if (void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const char* why = dlerror();
  fail("cuda: {} not found (looked in {} and the loader's path: {})", soname, KILN_CUDA_LIBDIR, why ? why : "");
}

// Opens the library and resolves its table, once (core/load_once.h).
template <class Api, class Resolve>
const Api& load_table(const std::string& soname, Resolve resolve) {
  return load_once<Api>([&] {
    Api api;
    resolve(open_library(soname), api);
    return api;
  });
}

}  // namespace

const NvrtcApi& nvrtc() {
  return load_table<NvrtcApi>(kNvrtc, [](void* h, NvrtcApi& api) {
#define KILN_CUBLAS_FN(name)
#define KILN_NVRTC_FN(name)                                                           \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(h, KILN_XSTR(name)));        \
  if (!api.name) fail("cuda: {} lacks {}", kNvrtc, KILN_XSTR(name));
#include "backends/cuda/toolkit_functions.def"
  });
}

const CublasApi& cublas() {
  return load_table<CublasApi>(kCublas, [](void* h, CublasApi& api) {
#define KILN_NVRTC_FN(name)
#define KILN_CUBLAS_FN(name)                                                          \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(h, KILN_XSTR(name)));        \
  if (!api.name) fail("cuda: {} lacks {}", kCublas, KILN_XSTR(name));
#include "backends/cuda/toolkit_functions.def"
  });
}

}  // namespace kiln::cuda
