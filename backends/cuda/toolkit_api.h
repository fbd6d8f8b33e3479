#pragma once
// NVRTC and cuBLAS, opened with dlopen on first use like the driver (driver_api.h): a kiln built with
// the CUDA toolkit neither maps their ~700 MB of libraries at every start (0.1 s) nor needs the
// toolkit installed where it runs on the CPU. nvrtc.h and cublas_v2.h supply only the types and
// signatures.
#include <cublas_v2.h>
#include <nvrtc.h>

namespace kiln::cuda {

struct NvrtcApi {
#define KILN_NVRTC_FN(name) decltype(&::name) name = nullptr;
#define KILN_CUBLAS_FN(name)
#include "backends/cuda/toolkit_functions.def"
};

struct CublasApi {
#define KILN_NVRTC_FN(name)
#define KILN_CUBLAS_FN(name) decltype(&::name) name = nullptr;
#include "backends/cuda/toolkit_functions.def"
};

// The loaded tables, from the toolkit kiln was built against (its lib64), else wherever the dynamic
// loader finds the library; raise `cuda: libnvrtc.so.13 not found (...)` when it is missing.
const NvrtcApi& nvrtc();
const CublasApi& cublas();

}  // namespace kiln::cuda
