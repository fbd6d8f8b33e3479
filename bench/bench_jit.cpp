// The JIT side by side with eager: the 8-op chain compiled (one fused kernel) against eager, the
// cache-hit overhead of a compiled 3-op function on small tensors, an MLP forward (784-256-10, batch
// 64) compiled vs eager, one Linear+ReLU layer with and without its GEMM epilogue fusion, and compile
// latency (passes + kernels) of the chain. bench/compare runs it next to PyTorch; bench/RESULTS.md has
// the figures.
#include <benchmark/benchmark.h>

#include <chrono>

#include "eager/cpu/gemm_epilogue.h"
#include "kiln/kiln.h"

namespace {

constexpr int64_t kBig = int64_t(1) << 24;

void set_threads(benchmark::State& state) { kiln::set_num_threads(int(state.range(0))); }

kiln::Tensor chain(const kiln::Tensor& x) {
  return kiln::sigmoid(kiln::tanh(x * 1.5 + 0.5) * x) + kiln::exp(x) * 0.1 - x;
}

kiln::Function compiled_chain(int64_t n) {
  return kiln::compile(kiln::trace([](const kiln::Tensors& in) { return kiln::Tensors{chain(in[0])}; },
                                   {kiln::randn({n})}));
}

void BM_ChainCompiled16M(benchmark::State& state) {
  set_threads(state);
  kiln::Tensor x = kiln::randn({kBig});
  kiln::Function f = compiled_chain(kBig);
  { kiln::Tensor warm = f({x})[0]; }
  for (auto _ : state) {
    kiln::Tensor y = f({x})[0];
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
  state.counters["GBps_8B"] =
      benchmark::Counter(double(kBig) * 8 * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["kernels"] = double(kiln::compile_stats(f).kernels);
}
BENCHMARK(BM_ChainCompiled16M)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ChainEager16M(benchmark::State& state) {
  set_threads(state);
  kiln::Tensor x = kiln::randn({kBig});
  { kiln::Tensor warm = chain(x); }
  for (auto _ : state) {
    kiln::Tensor y = chain(x);
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ChainEager16M)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// A cache hit on a compiled 3-op function of 8-element tensors: the JIT's per-call price.
void BM_CompiledCall3Ops(benchmark::State& state) {
  kiln::set_num_threads(1);
  kiln::Function f = kiln::compile(kiln::trace(
      [](const kiln::Tensors& in) { return kiln::Tensors{kiln::relu(in[0] * in[1] + 1.0)}; },
      {kiln::randn({8}), kiln::randn({8})}));
  kiln::Tensors ins = {kiln::randn({8}), kiln::randn({8})};
  { auto warm = f(ins); }
  for (auto _ : state) benchmark::DoNotOptimize(f(ins)[0].impl());
}
BENCHMARK(BM_CompiledCall3Ops)->Unit(benchmark::kMicrosecond);

void BM_EagerCall3Ops(benchmark::State& state) {
  kiln::set_num_threads(1);
  kiln::Tensor a = kiln::randn({8}), b = kiln::randn({8});
  for (auto _ : state) benchmark::DoNotOptimize(kiln::relu(a * b + 1.0).impl());
}
BENCHMARK(BM_EagerCall3Ops)->Unit(benchmark::kMicrosecond);

std::shared_ptr<kiln::nn::Sequential> mlp() {
  kiln::manual_seed(0);
  auto m = std::make_shared<kiln::nn::Sequential>();
  m->add(std::make_shared<kiln::nn::Linear>(784, 256)).add(std::make_shared<kiln::nn::ReLU>());
  m->add(std::make_shared<kiln::nn::Linear>(256, 10));
  return m;
}

void BM_MLPForwardCompiled(benchmark::State& state) {
  set_threads(state);
  auto m = mlp();
  kiln::Tensor x = kiln::randn({64, 784});
  kiln::NoGradGuard no_grad;
  kiln::Function f = kiln::compile(
      kiln::trace_module(*m, [m](const kiln::Tensors& in) { return kiln::Tensors{m->forward(in[0])}; }, {x}));
  { auto warm = f({x}); }
  for (auto _ : state) benchmark::DoNotOptimize(f({x})[0].impl());
}
BENCHMARK(BM_MLPForwardCompiled)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_MLPForwardEager(benchmark::State& state) {
  set_threads(state);
  auto m = mlp();
  kiln::Tensor x = kiln::randn({64, 784});
  kiln::NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(m->forward(x).impl());
}
BENCHMARK(BM_MLPForwardEager)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// One compiled Linear+ReLU layer (batch 64) three ways: the GEMM epilogue folded into the GEMM call
// (gemm group on oneDNN post-ops), fuse_gemm_epilogue off (the GEMM, then the x86 kernel for
// bias+relu: how it ran before the pass), and the gemm group's fallback for builds without oneDNN
// (the GEMM, then the epilogue compiled as a fusion group).
enum GemmMode : int64_t { kEpilogueOnednn = 1, kEpilogueOff = 0, kEpilogueFallback = 2 };

void BM_LinearReluCompiled(benchmark::State& state) {
  set_threads(state);
  int64_t in = state.range(1), out = state.range(2);
  auto mode = GemmMode(state.range(3));
  kiln::manual_seed(0);
  auto layer = std::make_shared<kiln::nn::Sequential>();
  layer->add(std::make_shared<kiln::nn::Linear>(in, out)).add(std::make_shared<kiln::nn::ReLU>());
  kiln::Tensor x = kiln::randn({64, in});
  kiln::NoGradGuard no_grad;
  kiln::jit::CompileOptions o;
  if (mode == kEpilogueOff) o.pipeline.disable.push_back("fuse_gemm_epilogue");
  bool onednn = kiln::cpu::onednn_gemm_enabled();
  kiln::cpu::set_onednn_gemm(onednn && mode == kEpilogueOnednn);
  if (mode == kEpilogueOnednn && !onednn) {
    state.SkipWithError("built without oneDNN");
    return;
  }
  kiln::Function f = kiln::compile(
      kiln::trace_module(*layer, [layer](const kiln::Tensors& in) { return kiln::Tensors{layer->forward(in[0])}; }, {x}),
      o);
  { auto warm = f({x}); }
  for (auto _ : state) benchmark::DoNotOptimize(f({x})[0].impl());
  kiln::cpu::set_onednn_gemm(onednn);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * 64 * double(in * out) * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["gemm_groups"] = double(kiln::compile_stats(f).gemm_kernels);
}
BENCHMARK(BM_LinearReluCompiled)
    ->ArgNames({"threads", "in", "out", "epilogue"})
    ->ArgsProduct({{1, 2}, {784}, {256}, {kEpilogueOff, kEpilogueOnednn, kEpilogueFallback}})
    ->ArgsProduct({{1, 2}, {256}, {10}, {kEpilogueOff, kEpilogueOnednn, kEpilogueFallback}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// First call of a fresh compiled chain: passes, fusion and kernel code generation (a cache miss).
void BM_CompileChain(benchmark::State& state) {
  kiln::set_num_threads(1);
  kiln::Tensor x = kiln::randn({64});
  kiln::Function traced = kiln::trace([](const kiln::Tensors& in) { return kiln::Tensors{chain(in[0])}; }, {x});
  double kernel_ms = 0;
  for (auto _ : state) {
    kiln::Function f = kiln::compile(traced);
    benchmark::DoNotOptimize(f({x})[0].impl());
    auto s = kiln::compile_stats(f);
    for (double k : s.kernel_compile_ms) kernel_ms += k;
  }
  state.counters["kernel_compile_ms"] = kernel_ms / double(state.iterations());
}
BENCHMARK(BM_CompileChain)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
