#pragma once
// Whether kiln's kernels may call oneDNN's primitives (convolutions, the JIT's GEMM epilogues): built
// with oneDNN (meson option dnnl), and not switched off by set_onednn_gemm(false) or the environment
// (KILN_ONEDNN_GEMM=0). GEMMs through dnnl_sgemm (eager/cpu/blas.cpp) do not ask: it is the BLAS.

#include <string_view>

namespace kiln::cpu {

bool onednn_gemm_enabled();
// Overrides the environment; tests and benchmarks use it to take the fallbacks on a oneDNN build.
void set_onednn_gemm(bool on);

// Whether a primitive's implementation name (pd.impl_info_str()) is oneDNN's scalar reference kernel
// ("ref:any"): what bf16 gets on a CPU without AVX-512, far slower than widening to float32 and running
// kiln's own kernels, so the bf16 paths decline it.
bool onednn_reference_impl(std::string_view impl);

}  // namespace kiln::cpu
