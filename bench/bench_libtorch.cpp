// libtorch's C++ per-op cost for the same 1-element float32 add as BM_DispatchAdd1 in bench_eager.cpp:
// at::add through the ATen dispatcher, output allocated each call. Built only when libtorch is found.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

namespace {

void BM_LibtorchAdd1(benchmark::State& state) {
  at::set_num_threads(int(state.range(0)));
  at::Tensor a = at::ones({1}), b = at::ones({1});
  for (auto _ : state) {
    at::Tensor c = a + b;
    benchmark::DoNotOptimize(c.unsafeGetTensorImpl());
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(double(state.iterations()) / 1e9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_LibtorchAdd1)->ArgName("threads")->Arg(1)->Arg(2);

// The same with autograd and inference-mode bookkeeping off (libtorch at its cheapest).
void BM_LibtorchAdd1Inference(benchmark::State& state) {
  at::set_num_threads(int(state.range(0)));
  c10::InferenceMode guard;
  at::Tensor a = at::ones({1}), b = at::ones({1});
  for (auto _ : state) {
    at::Tensor c = a + b;
    benchmark::DoNotOptimize(c.unsafeGetTensorImpl());
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(double(state.iterations()) / 1e9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_LibtorchAdd1Inference)->ArgName("threads")->Arg(1)->Arg(2);

}  // namespace

BENCHMARK_MAIN();
