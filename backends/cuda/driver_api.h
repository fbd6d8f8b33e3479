#pragma once
// The CUDA driver API, loaded at run time: libcuda.so.1 is opened with dlopen on first use, so one
// kiln binary starts (and runs on the CPU) on a machine with no NVIDIA driver. cuda.h supplies only
// the types and signatures.
#include <cuda.h>

#include <string>

namespace kiln::cuda {

struct DriverApi {
#define KILN_CU_FN(name) decltype(&::name) name = nullptr;
#include "backends/cuda/driver_functions.def"
};

// The loaded table; raises `cuda: no driver found (libcuda.so.1)` when the library is missing.
const DriverApi& driver();
// Opens `library` and resolves the table without caching it: the seam the tests use for the error
// text on machines that do have a driver.
DriverApi load_driver(const std::string& library);
// Raises kiln::Error naming the call and the code's name when r is not CUDA_SUCCESS.
void check(CUresult r, const char* call);

}  // namespace kiln::cuda

#define KILN_CU(call_name, ...) ::kiln::cuda::check(::kiln::cuda::driver().call_name(__VA_ARGS__), #call_name)
