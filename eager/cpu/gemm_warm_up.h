#pragma once
// oneDNN's sgemm generates its kernels on the process's first call (~20 ms, bench/RESULTS.md). A caller
// with other work to do before its first GEMM (CompiledTrainStep's first call records and compiles the
// step first) has that set-up run on another thread meanwhile; a GEMM that comes before it ends waits
// inside oneDNN for the same set-up. Once per process; nothing where kiln is built without oneDNN.
namespace kiln::cpu::blas {

void warm_up_in_background();

}  // namespace kiln::cpu::blas
