// Inter-op scheduling on a two-branch model: two independent MLP towers (256 wide, 3 layers each,
// batch 16) on one input, concatenated. Each GEMM is 16x256x256 (2 MFLOP), too small to keep every
// core busy, so the towers gain from running side by side. Interpreted and compiled, at 1 inter-op
// thread (sequential, each step with all OpenMP threads) and at 2 (one OpenMP thread per step).
// bench/RESULTS.md has the figures.
#include <benchmark/benchmark.h>

#include <omp.h>

#include "kiln/kiln.h"

namespace {

constexpr int64_t kBatch = 16, kWidth = 256, kLayers = 3;

kiln::Tensor tower(kiln::Tensor h, const kiln::Tensors& p, size_t first) {
  for (int64_t l = 0; l < kLayers; ++l) h = kiln::relu(kiln::matmul(h, p[first + 2 * size_t(l)]) + p[first + 2 * size_t(l) + 1]);
  return h;
}

struct Model {
  kiln::Tensor x;
  kiln::Tensors params;  // tower a's (w, b) per layer, then tower b's
  kiln::Function traced;
};

Model make_model() {
  kiln::manual_seed(0);
  Model m;
  m.x = kiln::randn({kBatch, kWidth});
  for (int64_t i = 0; i < 2 * kLayers; ++i) {
    m.params.push_back(kiln::randn({kWidth, kWidth}) * 0.05);
    m.params.push_back(kiln::randn({kWidth}) * 0.1);
  }
  kiln::Tensors sample{m.x};
  sample.insert(sample.end(), m.params.begin(), m.params.end());
  m.traced = kiln::trace(
      [](const kiln::Tensors& in) {
        kiln::Tensors p(in.begin() + 1, in.end());
        return kiln::Tensors{kiln::cat({tower(in[0], p, 0), tower(in[0], p, size_t(2 * kLayers))}, 1)};
      },
      sample);
  return m;
}

void run(benchmark::State& state, bool compiled) {
  int saved = kiln::get_num_interop_threads();
  int saved_intra = kiln::get_num_threads();
  kiln::set_num_interop_threads(int(state.range(0)));
  kiln::set_num_threads(state.range(1) == 0 ? omp_get_num_procs() : int(state.range(1)));
  Model m = make_model();
  kiln::Function f = compiled ? kiln::compile(m.traced) : m.traced;
  kiln::Tensors in{m.x};
  in.insert(in.end(), m.params.begin(), m.params.end());
  { kiln::Tensor warm = f(in)[0]; }
  for (auto _ : state) {
    kiln::Tensor y = f(in)[0];
    benchmark::DoNotOptimize(y.raw_data());
  }
  kiln::set_num_interop_threads(saved);
  kiln::set_num_threads(saved_intra);
}

void BM_TwoTowersInterpreted(benchmark::State& state) { run(state, false); }
void BM_TwoTowersCompiled(benchmark::State& state) { run(state, true); }
// intra 0: every core (the default).
void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"interop", "intra"})->Args({1, 1})->Args({1, 0})->Args({2, 0});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(BM_TwoTowersInterpreted)->Apply(args);
BENCHMARK(BM_TwoTowersCompiled)->Apply(args);

}  // namespace

BENCHMARK_MAIN();
