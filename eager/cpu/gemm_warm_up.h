#pragma once
// oneDNN's sgemm generates its kernels on the process's first call (~20 ms, bench/RESULTS.md). A caller
// with other work to do before its first GEMM has that set-up run on another thread meanwhile: a module
// gaining a weight matrix (the rest of the model is still being built), CompiledTrainStep's first call
// (it records and compiles the step first). A GEMM that comes before the set-up ends waits inside oneDNN
// for it. Once per process; nothing where kiln is built without oneDNN.
namespace kiln::cpu::blas {

void warm_up_in_background();

}  // namespace kiln::cpu::blas
