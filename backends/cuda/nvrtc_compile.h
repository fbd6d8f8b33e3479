#pragma once
// CUDA C → cubin with NVRTC, for one architecture. Needs no GPU and no driver, which is what lets CI
// compile every rendered kernel.
#include <string>
#include <vector>

namespace kiln::cuda {

// Compiles `source` for sm_<arch> (90 for sm_90); raises with NVRTC's log when it does not compile.
// `what` names the module in errors; `extra` are further NVRTC options (the tests pass -G, which skips
// the optimiser that dominates NVRTC's time while still running the front end, codegen and ptxas).
std::vector<char> nvrtc_compile(const std::string& source, int arch, const std::string& what,
                                const std::vector<std::string>& extra = {});
// "13.0": part of the disk cache's key, since another NVRTC may generate other code.
std::string nvrtc_version();

}  // namespace kiln::cuda
