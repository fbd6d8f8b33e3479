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

// One entry point into its slot of the table; raises naming the library and the symbol.
template <class Fn>
void resolve(void* library, const std::string& soname, const char* name, Fn& slot) {
  slot = reinterpret_cast<Fn>(dlsym(library, name));
  if (!slot) fail("cuda: {} lacks {}", soname, name);
}

}  // namespace

const NvrtcApi& nvrtc() {
  return load_once<NvrtcApi>([] {
    void* h = open_library(kNvrtc);
    NvrtcApi api;
#define KILN_NVRTC_FN(name) resolve(h, kNvrtc, KILN_XSTR(name), api.name);
#define KILN_CUBLAS_FN(name)
#include "backends/cuda/toolkit_functions.def"
    return api;
  });
}

const CublasApi& cublas() {
  return load_once<CublasApi>([] {
    void* h = open_library(kCublas);
    CublasApi api;
#define KILN_NVRTC_FN(name)
#define KILN_CUBLAS_FN(name) resolve(h, kCublas, KILN_XSTR(name), api.name);
#include "backends/cuda/toolkit_functions.def"
    return api;
  });
}

}  // namespace kiln::cuda
