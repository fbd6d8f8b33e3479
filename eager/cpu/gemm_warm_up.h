#pragma once
// oneDNN's sgemm generates its kernels on the process's first call (~20 ms, bench/RESULTS.md). A caller
// with other work to do before its first GEMM has that set-up run on another thread meanwhile: a module
// gaining a weight matrix where a core is spare (the rest of the model is still being built),
// CompiledTrainStep's first call (it records and compiles the step first). A GEMM that comes before the set-up ends waits inside oneDNN
// for it. Once per process; nothing where kiln is built without oneDNN.
namespace kiln::cpu::blas {

void warm_up_in_background();
// The same where the process may run on more cores than kiln's threads (get_num_threads) fill, else nothing:
// beside an OpenMP team that already holds every core the set-up only slows the team down (each parallel
// region waits for the member it displaced: a GPT's construction at 2 threads on 2 cores took ~80 ms longer).
void warm_up_on_a_spare_core();

}  // namespace kiln::cpu::blas
