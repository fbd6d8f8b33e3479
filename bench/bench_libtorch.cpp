// libtorch's C++ per-op cost for the same 1-element float32 add as BM_DispatchAdd1 in bench_eager.cpp:
// at::add through the ATen dispatcher, output allocated each call. Built only when libtorch is found.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <optional>

namespace {

// A 1-element add per iteration; with `inference`, autograd and version bookkeeping are off
// (libtorch at its cheapest).
void add1(benchmark::State& state, bool inference) {
  at::set_num_threads(int(state.range(0)));
  std::optional<c10::InferenceMode> guard;
  if (inference) guard.emplace();
  at::Tensor a = at::ones({1}), b = at::ones({1});
  for (auto _ : state) {
    at::Tensor c = a + b;
    benchmark::DoNotOptimize(c.unsafeGetTensorImpl());
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(double(state.iterations()) / 1e9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
void BM_LibtorchAdd1(benchmark::State& state) { add1(state, false); }
void BM_LibtorchAdd1Inference(benchmark::State& state) { add1(state, true); }
BENCHMARK(BM_LibtorchAdd1)->ArgName("threads")->Arg(1)->Arg(2);
BENCHMARK(BM_LibtorchAdd1Inference)->ArgName("threads")->Arg(1)->Arg(2);

}  // namespace

BENCHMARK_MAIN();
